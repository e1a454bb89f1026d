/* Dispatch rows' hashing: Java String.hashCode of many Python strings in one call (engine/jhash.py). */
#include "jhash.h"
#include "kernels.h"

PyObject *mq_java_hashes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *strings;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "O!w*", &PyList_Type, &strings, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n_out, n = PyList_GET_SIZE(strings);
    if (!mq_int64s(&out, &n_out)) {
        goto done;
    }
    if (n_out != n) {
        PyErr_SetString(PyExc_ValueError, "strings and out differ in length");
        goto done;
    }
    int64_t *o = out.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyList_GET_ITEM(strings, i);
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "item %zd is %.100s, not str", i, Py_TYPE(s)->tp_name);
            goto done;
        }
        o[i] = (int32_t)mq_java_hash_more(0, PyUnicode_KIND(s), PyUnicode_DATA(s), 0, PyUnicode_GET_LENGTH(s));
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out);
    return result;
}

PyObject *mq_java_hash(PyObject *self, PyObject *s) {
    (void)self;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "java_hash takes a str, not %.100s", Py_TYPE(s)->tp_name);
        return NULL;
    }
    return PyLong_FromLong((int32_t)mq_java_hash_more(0, PyUnicode_KIND(s), PyUnicode_DATA(s), 0,
                                                      PyUnicode_GET_LENGTH(s)));
}
