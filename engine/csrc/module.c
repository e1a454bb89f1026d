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
    {"check_batch", mq_check_batch, METH_VARARGS,
     "check_batch(records, columns, parts, part_ends, store_host, prop_crc, max_body_bytes, out) -> (code, detail):\n"
     "every record of a producer-encoded batch against its COLUMNS row (engine.batch.record_batch); parts are the\n"
     "topics' length fields and bytes joined, part_ends (int64) where each ends. code 0: the batch holds, and\n"
     "out (int64, 3 per record) holds each record's start, store-time position and sys flag, in three runs;\n"
     "else the first check (CHECK_REASONS' order) that any record fails, detail the lowest topic index for\n"
     "a topic mismatch. ValueError for arguments that do not fit together (store host size, out, parts)."},
    {"stamp_batch", mq_stamp_batch, METH_VARARGS,
     "stamp_batch(buf, starts, sizes, store_ms_pos, queue_ids, queue_offsets, phys_offsets, store_ms, sealed):\n"
     "writes each record's queue id, queue offset, phys offset and store time (big-endian) into buf in place,\n"
     "then, when sealed, its whole-record CRC's ten digits, least significant first, into its __CRC32# tail.\n"
     "Columns are int64 arrays of one length; ValueError when a record leaves buf or cannot hold its fields."},
    {"group_ranks", mq_group_ranks, METH_VARARGS,
     "group_ranks(keys, out) -> groups: the records grouped by their int64 key, groups numbered in order of\n"
     "first appearance. out (int64, 4 per record, in runs): each record's rank within its group, its group;\n"
     "then, for each group, its first record and its record count (the first groups entries of each run)."},
    {"encode_batch", mq_encode_batch, METH_VARARGS,
     "encode_batch(bodies, parts, properties, born_hosts, store_host, prop_crc, ints, sizes) -> bytes: the records\n"
     "of a batch laid out as engine.log.record encodes them, the writer's fields zero: one per body, with its\n"
     "topic part (length field and bytes), its properties (bytes, the __CRC32# tail added when prop_crc) and\n"
     "born host (packed; born_hosts None: the store host). ints (int64, 5 per record, in runs): queue id, flag,\n"
     "sys flag (its host bits set here), born time, reconsume times; sizes (int64) gets each TOTALSIZE.\n"
     "ValueError for properties over 32767 bytes or a host not 8 or 20 bytes, OverflowError for an int32\n"
     "field out of range, TypeError for a column that is not bytes."},
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
