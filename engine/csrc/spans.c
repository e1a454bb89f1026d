/* Kernels over spans of one buffer. */
#include <string.h>

#include "crc32.h"
#include "kernels.h"

int mq_int64s(Py_buffer *view, Py_ssize_t *count) {
    if (view->len % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "an int64 array argument is not whole int64s");
        return 0;
    }
    *count = view->len / (Py_ssize_t)sizeof(int64_t);
    return 1;
}

PyObject *mq_crc31_spans(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, starts, ends, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &data, &starts, &ends, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n, n_ends, n_out;
    if (!mq_int64s(&starts, &n) || !mq_int64s(&ends, &n_ends) || !mq_int64s(&out, &n_out)) {
        goto done;
    }
    if (n_ends != n || n_out != n) {
        PyErr_SetString(PyExc_ValueError, "starts, ends and out differ in length");
        goto done;
    }
    const int64_t *s = starts.buf, *e = ends.buf;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0 || e[i] < s[i] || e[i] > data.len) {
            PyErr_Format(PyExc_ValueError, "span %zd [%lld, %lld) leaves the %zd-byte buffer", i, (long long)s[i],
                         (long long)e[i], data.len);
            goto done;
        }
        total += e[i] - s[i];
    }
    int64_t *o = out.buf;
    const uint8_t *base = data.buf;
    MQ_BEGIN_ALLOW_THREADS_IF(total)
    for (Py_ssize_t i = 0; i < n; i++) {
        o[i] = mq_crc31(base + s[i], (size_t)(e[i] - s[i]));
    }
    MQ_END_ALLOW_THREADS_IF
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&out);
    return result;
}

PyObject *mq_gather_spans(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, positions, lengths, offsets, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &data, &positions, &lengths, &offsets, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n, n_lengths;
    if (!mq_int64s(&positions, &n) || !mq_int64s(&lengths, &n_lengths)) {
        goto done;
    }
    if (n_lengths != n || offsets.len != (n + 1) * (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "positions and lengths differ in length, or offsets is not n + 1 int32s");
        goto done;
    }
    const int64_t *p = positions.buf, *len = lengths.buf;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (len[i] < 0 || p[i] < 0 || p[i] > data.len - len[i]) {
            PyErr_Format(PyExc_ValueError, "span %zd (%lld bytes at %lld) leaves the %zd-byte buffer", i,
                         (long long)len[i], (long long)p[i], data.len);
            goto done;
        }
        total += len[i];
        if (total > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "the spans hold more bytes than int32 offsets can reach");
            goto done;
        }
    }
    if (total != out.len) {
        PyErr_Format(PyExc_ValueError, "out holds %zd bytes, the spans %lld", out.len, (long long)total);
        goto done;
    }
    int32_t *o = offsets.buf;
    uint8_t *dest = out.buf;
    const uint8_t *base = data.buf;
    MQ_BEGIN_ALLOW_THREADS_IF(total)
    int32_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        o[i] = at;
        memcpy(dest + at, base + p[i], (size_t)len[i]);
        at += (int32_t)len[i];
    }
    o[n] = at;
    MQ_END_ALLOW_THREADS_IF
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&positions);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return result;
}
