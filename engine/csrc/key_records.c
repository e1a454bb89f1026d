/* A key query's answer (engine/read/lookup.py query_keys): the records each key took (engine/csrc/key_match.c
 * keys_holding), every key's oldest first, one key after another, copied out of the commitlog files into one
 * bytes with their columns; and the commitlog files as the kernels of a query take them, a list of buffers. */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "record.h"

int mq_files(PyObject *files, Py_ssize_t n, MqFiles *out) {
    out->views = NULL;
    out->count = 0;
    if (!PyList_Check(files) || PyList_GET_SIZE(files) != n) {
        PyErr_SetString(PyExc_ValueError, "files is not a list of one buffer a file base");
        return 0;
    }
    out->views = PyMem_Calloc((size_t)n + 1, sizeof(Py_buffer));
    if (out->views == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t f = 0; f < n; f++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(files, f), &out->views[f], PyBUF_SIMPLE) != 0) {
            return 0;
        }
        out->count = f + 1;
    }
    return 1;
}

void mq_files_release(MqFiles *files) {
    for (Py_ssize_t f = 0; f < files->count; f++) {
        PyBuffer_Release(&files->views[f]);
    }
    PyMem_Free(files->views);
    files->views = NULL;
    files->count = 0;
}

/* Taken rows by key, then by phys offset: each key's records oldest first. */
static int by_key_then_phys(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    if (x[0] != y[0]) {
        return x[0] < y[0] ? -1 : 1;
    }
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static PyObject *int_list(const int64_t *values, Py_ssize_t n, Py_ssize_t stride) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        PyObject *value = PyLong_FromLongLong(values[i * stride]);
        if (value == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, value);
    }
    return list;
}

PyObject *mq_key_records(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *files;
    Py_buffer taken;
    long long n_taken, n_keys;
    if (!PyArg_ParseTuple(args, "Ow*LL", &files, &taken, &n_taken, &n_keys)) {
        return NULL;
    }
    PyObject *result = NULL, *data = NULL, *queue_offsets = NULL, *phys_offsets = NULL, *sizes = NULL, *counts = NULL;
    int64_t *per_key = NULL, *column = NULL;
    MqFiles mapped = {0};
    Py_ssize_t capacity;
    if (!mq_int64s(&taken, &capacity)) {
        goto done;
    }
    capacity /= TAKEN_COLUMNS;
    if (n_taken < 0 || n_taken > capacity || n_keys < 0 || !mq_files(files, PyList_Check(files) ?
                                                                       PyList_GET_SIZE(files) : -1, &mapped)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "more taken rows than the array holds, or a negative key count");
        }
        goto done;
    }
    int64_t *rows = taken.buf, total = 0;
    for (Py_ssize_t r = 0; r < n_taken; r++) {
        const int64_t *row = rows + TAKEN_COLUMNS * r;
        if (row[0] < 0 || row[0] >= n_keys || row[2] < 0 || row[2] >= mapped.count || row[3] < 0 ||
            row[4] < QUEUE_OFFSET_POS + 8 || row[4] > mapped.views[row[2]].len - row[3]) {
            PyErr_Format(PyExc_ValueError, "taken row %zd is of no key, or leaves its file", r);
            goto done;
        }
        total += row[4];
    }
    per_key = PyMem_Calloc((size_t)n_keys + 1, sizeof(int64_t));
    column = PyMem_Malloc(sizeof(int64_t) * ((size_t)n_taken + 1));
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (per_key == NULL || column == NULL || data == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        goto done;
    }
    qsort(rows, (size_t)n_taken, sizeof(int64_t) * TAKEN_COLUMNS, by_key_then_phys);
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    for (Py_ssize_t r = 0; r < n_taken; r++) {
        const int64_t *row = rows + TAKEN_COLUMNS * r;
        const uint8_t *record = (const uint8_t *)mapped.views[row[2]].buf + row[3];
        memcpy(out, record, (size_t)row[4]);
        out += row[4];
        column[r] = mq_be64(record + QUEUE_OFFSET_POS);
        per_key[row[0]] += 1;
    }
    queue_offsets = int_list(column, (Py_ssize_t)n_taken, 1);
    phys_offsets = int_list(rows + 1, (Py_ssize_t)n_taken, TAKEN_COLUMNS);
    sizes = int_list(rows + 4, (Py_ssize_t)n_taken, TAKEN_COLUMNS);
    counts = int_list(per_key, (Py_ssize_t)n_keys, 1);
    if (queue_offsets != NULL && phys_offsets != NULL && sizes != NULL && counts != NULL) {
        result = PyTuple_Pack(5, data, queue_offsets, phys_offsets, sizes, counts);
    }
done:
    Py_XDECREF(data);
    Py_XDECREF(queue_offsets);
    Py_XDECREF(phys_offsets);
    Py_XDECREF(sizes);
    Py_XDECREF(counts);
    PyMem_Free(per_key);
    PyMem_Free(column);
    mq_files_release(&mapped);
    PyBuffer_Release(&taken);
    return result;
}
