/* The bodies of a packed pull reply (mqstore.ipc.wire.messages.MessageBatch): records as stored, back to back from
 * begin, each checked as the client's decoder checks it (its size field is its packed size, its body
 * lies inside it) before its body is handed over as bytes or as a fixed-width head. */
#include <string.h>

#include "kernels.h"
#include "record.h"

#define COMPRESSED SYSFLAG_COMPRESSED

enum walk_fault { WALK_OK, WALK_SIZE, WALK_SHORT, WALK_BODY };

/* Where the walk stopped and why; the values its message reports. */
typedef struct {
    enum walk_fault fault;
    int64_t start, size, body_len, need;
} walk_result;

/* Each record's body position, length and sys flag into spans (3 a record), each read from the record's
 * own bytes (mq_record_body): a record that ends before its BODYLENGTH does is too short for its
 * header, whatever follows it in the reply. */
static walk_result walk(const uint8_t *data, const int64_t *sizes, Py_ssize_t n, int64_t begin, int64_t *spans) {
    walk_result r = {WALK_OK, begin, 0, 0, 0};
    for (Py_ssize_t i = 0; i < n; i++, r.start += r.size) {
        r.size = sizes[i];
        if (mq_be32(data + r.start + TOTALSIZE_POS) != r.size) {
            r.fault = WALK_SIZE;
            return r;
        }
        MqRecordFields f;
        switch (mq_record_body(data + r.start, r.size, &f)) {
        case RECORD_OK:
            break;
        case RECORD_BODY_LEN:
            r.fault = WALK_BODY;
            r.body_len = f.body_len;
            return r;
        default:
            r.fault = WALK_SHORT;
            r.need = r.size < SYSFLAG_POS + 4 ? SYSFLAG_POS + 4 : f.body_pos;
            return r;
        }
        spans[3 * i] = r.start + f.body_pos;
        spans[3 * i + 1] = f.body_len;
        spans[3 * i + 2] = f.sys_flag;
    }
    return r;
}

/* The spans of the n records back to back in data from begin (sizes: int64 each), or NULL and a
 * ValueError when they do not fit in data or a record fails (its message: the decoder's). */
static int64_t *body_spans(const Py_buffer *data, long long begin, Py_buffer *sizes, Py_ssize_t *n) {
    if (!mq_int64s(sizes, n)) {
        return NULL;
    }
    const int64_t *s = sizes->buf;
    int64_t end = begin;
    for (Py_ssize_t i = 0; i < *n && end >= 0; i++) {
        end = s[i] < 8 || s[i] > data->len - end ? -1 : end + s[i];
    }
    if (begin < 0 || end < 0 || end > data->len) {
        PyErr_Format(PyExc_ValueError, "%zd records of at least 8 bytes from byte %lld leave the %zd-byte reply", *n,
                     begin, data->len);
        return NULL;
    }
    int64_t *spans = PyMem_Malloc((size_t)(3 * *n + 1) * sizeof(int64_t));
    if (spans == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    walk_result r;
    MQ_BEGIN_ALLOW_THREADS_IF(end - begin)
    r = walk(data->buf, s, *n, begin, spans);
    MQ_END_ALLOW_THREADS_IF
    switch (r.fault) {
    case WALK_OK:
        return spans;
    case WALK_SIZE:
        PyErr_Format(PyExc_ValueError, "no %lld-byte record at byte %lld of a packed reply", (long long)r.size,
                     (long long)r.start);
        break;
    case WALK_SHORT:
        PyErr_Format(PyExc_ValueError, "a record too short for its header: it needs %lld bytes, its size is %lld",
                     (long long)r.need, (long long)r.size);
        break;
    case WALK_BODY:
        PyErr_Format(PyExc_ValueError, "a body of %lld bytes outside its record", (long long)r.body_len);
        break;
    }
    PyMem_Free(spans);
    return NULL;
}

/* The indices of the records whose sys flag marks their body compressed. */
static PyObject *compressed(const int64_t *spans, Py_ssize_t n) {
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        if (spans[3 * i + 2] & COMPRESSED) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(out, index) < 0) {
                Py_CLEAR(out);
            }
            Py_XDECREF(index);
        }
    }
    return out;
}

PyObject *mq_packed_bodies(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, sizes;
    long long begin;
    if (!PyArg_ParseTuple(args, "y*Ly*", &data, &begin, &sizes)) {
        return NULL;
    }
    PyObject *result = NULL, *bodies = NULL, *flagged = NULL;
    Py_ssize_t n;
    int64_t *spans = body_spans(&data, begin, &sizes, &n);
    if (spans == NULL || (bodies = PyList_New(n)) == NULL) {
        goto done;
    }
    const char *base = data.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *body = PyBytes_FromStringAndSize(base + spans[3 * i], (Py_ssize_t)spans[3 * i + 1]);
        if (body == NULL) {
            goto done;
        }
        PyList_SET_ITEM(bodies, i, body);
    }
    if ((flagged = compressed(spans, n)) != NULL) {
        result = PyTuple_Pack(2, bodies, flagged);
    }
done:
    Py_XDECREF(bodies);
    Py_XDECREF(flagged);
    PyMem_Free(spans);
    PyBuffer_Release(&data);
    PyBuffer_Release(&sizes);
    return result;
}

PyObject *mq_packed_body_heads(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, sizes;
    long long begin;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "y*Ly*n", &data, &begin, &sizes, &width)) {
        return NULL;
    }
    PyObject *result = NULL, *heads = NULL, *flagged = NULL;
    Py_ssize_t n;
    int64_t *spans = body_spans(&data, begin, &sizes, &n);
    if (spans == NULL) {
        goto done;
    }
    if (width < 0 || (n > 0 && width > INT64_MAX / n)) {
        PyErr_Format(PyExc_ValueError, "no heads of %zd bytes for %zd bodies", width, n);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!(spans[3 * i + 2] & COMPRESSED) && spans[3 * i + 1] < width) {
            PyErr_Format(PyExc_ValueError, "body %zd has %lld bytes, fewer than a head's %zd", i,
                         (long long)spans[3 * i + 1], width);
            goto done;
        }
    }
    if ((heads = PyBytes_FromStringAndSize(NULL, n * width)) == NULL || (flagged = compressed(spans, n)) == NULL) {
        goto done;
    }
    char *out = PyBytes_AS_STRING(heads);
    const char *base = data.buf;
    for (Py_ssize_t i = 0; i < n; i++, out += width) {
        if (spans[3 * i + 2] & COMPRESSED) {
            memset(out, 0, (size_t)width); /* its inflated body's head: the caller writes it */
        } else {
            memcpy(out, base + spans[3 * i], (size_t)width);
        }
    }
    result = PyTuple_Pack(2, heads, flagged);
done:
    Py_XDECREF(heads);
    Py_XDECREF(flagged);
    PyMem_Free(spans);
    PyBuffer_Release(&data);
    PyBuffer_Release(&sizes);
    return result;
}

PyObject *mq_packed_extent(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer sizes;
    if (!PyArg_ParseTuple(args, "y*", &sizes)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n, short_at = -1;
    if (!mq_int64s(&sizes, &n)) {
        goto done;
    }
    const int64_t *s = sizes.buf;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 8 && short_at < 0) {
            short_at = i;
        }
        if (__builtin_add_overflow(total, s[i], &total)) {
            PyErr_SetString(PyExc_ValueError, "the sizes' sum passes int64");
            goto done;
        }
    }
    result = Py_BuildValue("(Ln)", (long long)total, short_at);
done:
    PyBuffer_Release(&sizes);
    return result;
}
