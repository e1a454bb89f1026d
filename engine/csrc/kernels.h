/* The kernels engine._native exports, one line each, and the buffer helpers they share. */
#ifndef MQSTORE_KERNELS_H
#define MQSTORE_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* An int64 array argument: its buffer and its length in elements; 0 and a Python error when its size
 * is not whole int64s. */
int mq_int64s(Py_buffer *view, Py_ssize_t *count);

/* A kernel lets other threads run while it loops only over this many bytes or more: taking the GIL
 * back waits for the thread that took it to give it up (up to the 5 ms switch interval), which
 * costs a small batch far more than its loop (a producer's batch of 100 records waited 300 us
 * for its I/O thread, to encode in 5). */
#define MQ_GIL_FREE_BYTES (1 << 20)
#define MQ_BEGIN_ALLOW_THREADS_IF(bytes) { PyThreadState *mq_save = (bytes) >= MQ_GIL_FREE_BYTES ? PyEval_SaveThread() : NULL;
#define MQ_END_ALLOW_THREADS_IF if (mq_save != NULL) { PyEval_RestoreThread(mq_save); } }

/* Big-endian reads and writes of the fields of RocketMQ's files. */
static inline int64_t mq_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return (int64_t)v;
}

static inline int32_t mq_be32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}

static inline int16_t mq_be16(const uint8_t *p) {
    return (int16_t)((uint16_t)p[0] << 8 | (uint16_t)p[1]);
}

/* Writes the low width bytes of v big-endian at p; returns the byte after them. */
static inline uint8_t *mq_put_be(uint8_t *p, uint64_t v, int width) {
    for (int k = width - 1; k >= 0; k--) {
        p[k] = (uint8_t)v;
        v >>= 8;
    }
    return p + width;
}

PyObject *mq_crc31_spans(PyObject *self, PyObject *args);
PyObject *mq_check_batch(PyObject *self, PyObject *args);
PyObject *mq_stamp_batch(PyObject *self, PyObject *args);
PyObject *mq_group_ranks(PyObject *self, PyObject *args);
PyObject *mq_encode_batch(PyObject *self, PyObject *args);
PyObject *mq_index_select(PyObject *self, PyObject *args);
PyObject *mq_record_columns(PyObject *self, PyObject *args);
PyObject *mq_scan_records(PyObject *self, PyObject *args);
PyObject *mq_pull_rows(PyObject *self, PyObject *args);
PyObject *mq_records_holding(PyObject *self, PyObject *args);

#endif
