/* The kernels engine._native exports, one line each, and the buffer helpers they share. */
#ifndef MQSTORE_KERNELS_H
#define MQSTORE_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* An int64 array argument: its buffer and its length in elements; 0 and a Python error when its size
 * is not whole int64s. */
int mq_int64s(Py_buffer *view, Py_ssize_t *count);

PyObject *mq_crc31_spans(PyObject *self, PyObject *args);
PyObject *mq_java_hash(PyObject *self, PyObject *s);
PyObject *mq_java_hashes(PyObject *self, PyObject *args);
PyObject *mq_index_key_hashes(PyObject *self, PyObject *args);
PyObject *mq_index_put(PyObject *self, PyObject *args);
PyObject *mq_cq_entries(PyObject *self, PyObject *args);
PyObject *mq_dispatch_keys(PyObject *self, PyObject *args);

#endif
