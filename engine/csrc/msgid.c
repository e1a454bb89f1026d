/* The producer's UNIQ_KEYs of a batch (mqstore.engine.log.msgid's UniqKeyGenerator.next_many): one id a
 * record, each the batch's head (the generator's prefix and the month span, in hex) followed by its
 * 16-bit counter as four uppercase hex digits, the counter counting on from the first and wrapping at
 * 65536. One str object a record, made here without a Python frame or an intermediate string. */
#include <string.h>

#include "kernels.h"

PyObject *mq_uniq_keys(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *head;
    long long counter;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "ULn", &head, &counter, &count)) {
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(head)) {
        PyErr_SetString(PyExc_ValueError, "an id's head is hex digits: ASCII");
        return NULL;
    }
    if (count < 0 || counter < 0 || counter > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "count must not be negative and the counter is 16 bits");
        return NULL;
    }
    static const char hex[] = "0123456789ABCDEF";
    Py_ssize_t head_len = PyUnicode_GET_LENGTH(head);
    const char *head_chars = (const char *)PyUnicode_1BYTE_DATA(head);
    PyObject *ids = PyList_New(count);
    if (ids == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *id = PyUnicode_New(head_len + 4, 127);
        if (id == NULL) {
            Py_DECREF(ids);
            return NULL;
        }
        char *out = (char *)PyUnicode_1BYTE_DATA(id);
        memcpy(out, head_chars, (size_t)head_len);
        unsigned c = (unsigned)((counter + i) & 0xFFFF);
        out[head_len] = hex[c >> 12];
        out[head_len + 1] = hex[c >> 8 & 0xF];
        out[head_len + 2] = hex[c >> 4 & 0xF];
        out[head_len + 3] = hex[c & 0xF];
        PyList_SET_ITEM(ids, i, id);
    }
    return ids;
}
