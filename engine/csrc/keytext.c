/* Key text (engine/batch/key_text.py): every record's UNIQ_KEY and KEYS as one UTF-8 text and the
 * int32 bounds of its spans, 2n + 1 of them: record r's UNIQ_KEY is text[bounds[2r]:bounds[2r + 1]],
 * its KEYS text[bounds[2r + 1]:bounds[2r + 2]]. What a producer sends, the writer checks and the
 * Dispatch frame carries, without a Python object per string. */
#include <string.h>

#include "jhash.h"
#include "kernels.h"

static int32_t bound_at(const uint8_t *bounds, Py_ssize_t i) {
    int32_t v;
    memcpy(&v, bounds + 4 * i, 4); /* a msgpack bin holds them at any alignment */
    return v;
}

int mq_key_bounds(const Py_buffer *text, const Py_buffer *bounds, Py_ssize_t n, int check_utf8) {
    if (n < 0 || n > (INT32_MAX - 1) / 2) { /* 2n + 1 int32 bounds, each a position in a text under 2 GiB */
        PyErr_Format(PyExc_ValueError, "%zd records cannot have key bounds", n);
        return 0;
    }
    if (bounds->len != 4 * (2 * n + 1)) {
        PyErr_Format(PyExc_ValueError, "%zd records need %zd key bounds, not %zd bytes of them", n, 2 * n + 1,
                     bounds->len);
        return 0;
    }
    const uint8_t *b = bounds->buf, *at = text->buf;
    Py_ssize_t bad = -1, not_utf8 = -1;
    MQ_BEGIN_ALLOW_THREADS_IF(text->len)
    int32_t prev = bound_at(b, 0);
    if (prev < 0 || prev > text->len) {
        bad = 0;
    }
    for (Py_ssize_t i = 1; bad < 0 && i <= 2 * n; i++) {
        int32_t end = bound_at(b, i);
        if (end < prev || end > text->len) {
            bad = i;
            break;
        }
        for (Py_ssize_t k = prev; check_utf8 && k < end;) {
            uint64_t word;
            if (end - k >= 8 && (memcpy(&word, at + k, 8), (word & 0x8080808080808080u) == 0)) {
                k += 8; /* eight ASCII bytes at once: the common text */
                continue;
            }
            uint32_t cp;
            Py_ssize_t step = at[k] < 0x80u ? 1 : mq_utf8_next(at + k, end - k, &cp);
            if (step == 0) {
                not_utf8 = i - 1;
                break;
            }
            k += step;
        }
        if (not_utf8 >= 0) {
            break;
        }
        prev = end;
    }
    MQ_END_ALLOW_THREADS_IF
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "key bound %zd goes back or leaves the %zd-byte key text", bad, text->len);
        return 0;
    }
    if (not_utf8 >= 0) {
        PyErr_Format(PyExc_ValueError, "record %zd's %s is not UTF-8", not_utf8 / 2, not_utf8 % 2 ? "KEYS" : "UNIQ_KEY");
        return 0;
    }
    return 1;
}

PyObject *mq_key_text_check(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer text, bounds;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*y*n", &text, &bounds, &n)) {
        return NULL;
    }
    PyObject *result = mq_key_bounds(&text, &bounds, n, 1) ? Py_NewRef(Py_None) : NULL;
    PyBuffer_Release(&text);
    PyBuffer_Release(&bounds);
    return result;
}

/* The UTF-8 of s, without a copy for an ASCII or cached one; NULL and TypeError for a non-str. */
static const char *utf8_of(PyObject *s, Py_ssize_t *len, const char *what, Py_ssize_t i) {
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "%s[%zd] is %.100s, not str", what, i, Py_TYPE(s)->tp_name);
        return NULL;
    }
    return PyUnicode_AsUTF8AndSize(s, len);
}

PyObject *mq_key_text(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *uniq_keys, *keys;
    Py_buffer bounds;
    if (!PyArg_ParseTuple(args, "O!O!w*", &PyList_Type, &uniq_keys, &PyList_Type, &keys, &bounds)) {
        return NULL;
    }
    PyObject *text = NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys), total = 0, len;
    PyObject *lists[2] = {uniq_keys, keys};
    const char *names[2] = {"uniq_keys", "keys"};
    if (PyList_GET_SIZE(uniq_keys) != n || bounds.len != 4 * (2 * n + 1)) {
        PyErr_SetString(PyExc_ValueError, "uniq_keys and keys differ in length, or bounds is not 2n + 1 int32s");
        goto done;
    }
    for (Py_ssize_t i = 0; i < 2 * n; i++) {
        if (utf8_of(PyList_GET_ITEM(lists[i % 2], i / 2), &len, names[i % 2], i / 2) == NULL) {
            goto done;
        }
        total += len;
    }
    if (total > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the key text passes 2 GiB");
        goto done;
    }
    text = PyBytes_FromStringAndSize(NULL, total);
    if (text == NULL) {
        goto done;
    }
    char *out = PyBytes_AS_STRING(text);
    int32_t at = 0;
    memcpy(bounds.buf, &at, 4);
    for (Py_ssize_t i = 0; i < 2 * n; i++) {
        const char *utf8 = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(lists[i % 2], i / 2), &len);
        memcpy(out + at, utf8, (size_t)len);
        at += (int32_t)len;
        memcpy((uint8_t *)bounds.buf + 4 * (i + 1), &at, 4);
    }
done:
    PyBuffer_Release(&bounds);
    return text;
}

PyObject *mq_key_text_join(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *texts, *bounds_list;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "O!O!w*", &PyList_Type, &texts, &PyList_Type, &bounds_list, &out)) {
        return NULL;
    }
    PyObject *joined = NULL;
    Py_ssize_t parts = PyList_GET_SIZE(texts), filled = 0, p = 0;
    Py_buffer *views = PyMem_Calloc((size_t)(2 * parts + 1), sizeof *views);
    if (views == NULL || PyList_GET_SIZE(bounds_list) != parts) {
        if (views == NULL) {
            PyErr_NoMemory();
        } else {
            PyErr_SetString(PyExc_ValueError, "texts and bounds differ in length");
        }
        goto done;
    }
    Py_ssize_t total = 0, rows = 0;
    for (; p < parts; p++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(texts, p), &views[2 * p], PyBUF_SIMPLE) < 0) {
            goto done;
        }
        if (PyObject_GetBuffer(PyList_GET_ITEM(bounds_list, p), &views[2 * p + 1], PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&views[2 * p]);
            goto done;
        }
        Py_ssize_t count = views[2 * p + 1].len / 4;
        if (count % 2 == 0 || views[2 * p + 1].len % 4 || !mq_key_bounds(&views[2 * p], &views[2 * p + 1], count / 2, 0)) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_ValueError, "part %zd's key bounds are not 2n + 1 int32s", p);
            }
            p++;
            goto done;
        }
        total += bound_at(views[2 * p + 1].buf, count - 1) - bound_at(views[2 * p + 1].buf, 0);
        rows += count - 1;
    }
    if (out.len != 4 * (rows + 1) || total > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "the parts need %zd key bounds, not %zd bytes of them (text of %zd bytes)",
                     rows + 1, out.len, total);
        goto done;
    }
    joined = PyBytes_FromStringAndSize(NULL, total);
    if (joined == NULL) {
        goto done;
    }
    uint8_t *text = (uint8_t *)PyBytes_AS_STRING(joined), *o = out.buf;
    int32_t at = 0;
    for (Py_ssize_t q = 0; q < parts; q++) {
        const uint8_t *b = views[2 * q + 1].buf;
        Py_ssize_t count = views[2 * q + 1].len / 4;
        int32_t first = bound_at(b, 0), last = bound_at(b, count - 1);
        memcpy(text + at, (const uint8_t *)views[2 * q].buf + first, (size_t)(last - first));
        for (Py_ssize_t i = 0; i < count - 1; i++) {
            int32_t v = bound_at(b, i) - first + at;
            memcpy(o + 4 * filled++, &v, 4);
        }
        at += last - first;
    }
    memcpy(o + 4 * filled, &at, 4);
done:
    for (Py_ssize_t q = 0; q < p && views != NULL; q++) {
        PyBuffer_Release(&views[2 * q]);
        PyBuffer_Release(&views[2 * q + 1]);
    }
    PyMem_Free(views);
    PyBuffer_Release(&out);
    return joined;
}
