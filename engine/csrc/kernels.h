/* The kernels engine._native exports, one line each, and the buffer helpers they share. */
#ifndef MQSTORE_KERNELS_H
#define MQSTORE_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* An int64 array argument: its buffer and its length in elements; 0 and a Python error when its size
 * is not whole int64s. */
int mq_int64s(Py_buffer *view, Py_ssize_t *count);

/* Big-endian reads of the fields of RocketMQ's files. */
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

PyObject *mq_crc31_spans(PyObject *self, PyObject *args);
PyObject *mq_index_select(PyObject *self, PyObject *args);
PyObject *mq_record_columns(PyObject *self, PyObject *args);
PyObject *mq_scan_records(PyObject *self, PyObject *args);
PyObject *mq_pull_rows(PyObject *self, PyObject *args);
PyObject *mq_records_holding(PyObject *self, PyObject *args);

#endif
