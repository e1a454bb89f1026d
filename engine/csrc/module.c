/* engine._native: the compiled per-record kernels. Each takes Python buffers (bytes, mmaps, numpy
 * arrays) and loops over a whole batch in one call; the numpy/Python code each one replaced is kept
 * under tests/oracle/ as the oracle the property tests hold it to, byte for byte. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32.h"
#include "kernels.h"

static PyMethodDef methods[] = {
    {"crc31_spans", mq_crc31_spans, METH_VARARGS,
     "crc31_spans(data, starts, ends, out): out[i] = zlib.crc32(data[starts[i]:ends[i]]) & 0x7FFFFFFF;\n"
     "starts, ends and out are int64 arrays of one length; ValueError when a span leaves data."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "engine._native",
    .m_doc = "mqstore's compiled per-record kernels",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    mq_crc32_init();
    return PyModule_Create(&module);
}
