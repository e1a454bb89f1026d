/* The kernels engine._native exports, one line each, and the buffer helpers they share. */
#ifndef MQSTORE_KERNELS_H
#define MQSTORE_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* An int64 array argument: its buffer and its length in elements; 0 and a Python error when its size
 * is not whole int64s. */
int mq_int64s(Py_buffer *view, Py_ssize_t *count);

/* The kernels' open-addressing tables: one of a power of two entries, at least twice n, is size
 * mq_table_mask(n) + 1; a 64-bit key starts probing at mq_probe_start (Fibonacci hashing). */
static inline size_t mq_table_mask(Py_ssize_t n) {
    size_t size = 1;
    while (size < 2 * (size_t)n) {
        size <<= 1;
    }
    return size - 1;
}

static inline size_t mq_probe_start(uint64_t key, size_t mask) {
    return (size_t)(key * 0x9E3779B97F4A7C15u >> 20) & mask;
}

PyObject *mq_crc31_spans(PyObject *self, PyObject *args);
PyObject *mq_java_hash(PyObject *self, PyObject *s);
PyObject *mq_java_hashes(PyObject *self, PyObject *args);
PyObject *mq_index_key_hashes(PyObject *self, PyObject *args);
PyObject *mq_index_put(PyObject *self, PyObject *args);
PyObject *mq_cq_entries(PyObject *self, PyObject *args);
PyObject *mq_dispatch_keys(PyObject *self, PyObject *args);

#endif
