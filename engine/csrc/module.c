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
    {"java_hash", mq_java_hash, METH_O,
     "java_hash(s) -> int: Java String.hashCode(s), a signed int, over its UTF-16 code units (a character\n"
     "outside the BMP as its surrogate pair, a lone surrogate as itself); TypeError for a non-str."},
    {"java_hashes", mq_java_hashes, METH_VARARGS,
     "java_hashes(strings, out): out[i] = Java String.hashCode(strings[i]) (a signed int) over its UTF-16\n"
     "code units; strings a list of str, out an int64 array as long; TypeError for an item not a str."},
    {"index_key_hashes", mq_index_key_hashes, METH_VARARGS,
     "index_key_hashes(topics, topic_codes, keys, uniq_keys, key_rows, key_hashes) -> count: the index keys\n"
     "of records given by topic code (int64s indexing the list topics), KEYS and UNIQ_KEY (lists of str, ''\n"
     "for none): each record's UNIQ_KEY, then its KEYS split on single spaces, empty tokens dropped, written\n"
     "as its row into key_rows and index_hash('topic#key') into key_hashes (int64 arrays of one length);\n"
     "ValueError for a topic code out of range or more keys than the outputs hold, TypeError for a non-str."},
    {"index_put", mq_index_put, METH_VARARGS,
     "index_put(header, slots, entries, key_hashes, phys_offsets, store_ms) -> count: IndexFile.putKey of\n"
     "each key in order into an index file's header (40 B), slots (4 B each) and entries (20 B each),\n"
     "as many as fit; entries first, then the header's begin and counts, the slots, the end offset and time.\n"
     "The inputs are int64 arrays of one length; ValueError for a negative phys offset, a key hash outside\n"
     "[0, 2**31 - 1] or buffers that are not an index file's, before anything is written."},
    {"cq_entries", mq_cq_entries, METH_VARARGS,
     "cq_entries(rows, entries, queue_offsets, bounds, queues) -> (queue_count, entry_count, min_phys_offset):\n"
     "the consume-queue entries of DISPATCH_COLUMNS rows (prepared and rolled-back transactions get none),\n"
     "grouped by queue in ascending (topic << 32 | queue_id) order, commitlog order within a queue: 20-byte\n"
     "big-endian entries into entries (20 B a row), each one's queue offset into queue_offsets (a row each),\n"
     "queue q's entries from bounds[q] to bounds[q + 1] (rows + 1) and its topic code and queue id at\n"
     "queues[2q], queues[2q + 1] (2 a row); ValueError when rows are not whole rows or outputs mis-sized."},
    {"dispatch_keys", mq_dispatch_keys, METH_VARARGS,
     "dispatch_keys(buf, topic_pos, topic_len, props_pos, props_len, schedule_topic, topic_codes, topic_firsts,\n"
     "tags_codes, exact, key_rows, key_hashes) -> (topic_count, key_count): for records whose topic and\n"
     "properties lie at the given positions and lengths of buf (int64 arrays of one length, as are the\n"
     "outputs but the last two), read TAGS, KEYS and UNIQ_KEY as RocketMQ's properties parser does; a record\n"
     "whose topic, TAGS, KEYS or UNIQ_KEY is not ASCII, or whose topic is schedule_topic, gets exact = 1 and\n"
     "nothing else; every other gets its topic's code (topics numbered as first met, topic_firsts[c] the first\n"
     "record of code c), its tags code (Java hash of TAGS, 0 without) and its index keys (UNIQ_KEY, then KEYS\n"
     "split on spaces, as index_hash('topic#key')) appended to key_rows and key_hashes while they have room;\n"
     "key_count counts every key, so a caller with less room calls again with key_count. ValueError for a\n"
     "topic or properties outside buf, or arrays of other lengths."},
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
