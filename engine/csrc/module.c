/* mqstore.engine._native: the compiled per-record kernels. Each takes Python buffers (bytes, mmaps, numpy
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
    {"gather_spans", mq_gather_spans, METH_VARARGS,
     "gather_spans(data, positions, lengths, offsets, out): the spans data[positions[i]:positions[i] + lengths[i]]\n"
     "copied one after another into out (uint8, exactly their total), offsets (int32, n + 1) where each starts\n"
     "and the last ends: an Arrow binary array's buffers. positions and lengths are int64 arrays of one length;\n"
     "ValueError when a span leaves data, a length is negative, out is not the total or it passes int32."},
    {"check_batch", mq_check_batch, METH_VARARGS,
     "check_batch(records, columns, parts, part_ends, store_host, prop_crc, max_body_bytes, out) -> (code, detail):\n"
     "every record of a producer-encoded batch against its COLUMNS row (mqstore.engine.batch.record_batch); parts are the\n"
     "topics' length fields and bytes joined, part_ends (int64) where each ends. code 0: the batch holds, and\n"
     "out (int64, 3 per record) holds each record's start, store-time position and sys flag, in three runs;\n"
     "else the first check (CHECK_REASONS' order) that any record fails, detail the lowest topic index for\n"
     "a topic mismatch; a record with a TIMER_DELAY_SEC / TIMER_DELAY_MS / TIMER_DELIVER_MS property fails (its\n"
     "put rule is the send path's). ValueError for arguments that do not fit together (store host size, out, parts)."},
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
     "of a batch laid out as mqstore.engine.log.record encodes them, the writer's fields zero: one per body, with its\n"
     "topic part (length field and bytes), its properties (bytes, the __CRC32# tail added when prop_crc) and\n"
     "born host (packed; born_hosts None: the store host). ints (int64, 5 per record, in runs): queue id, flag,\n"
     "sys flag (its host bits set here), born time, reconsume times; sizes (int64) gets each TOTALSIZE.\n"
     "ValueError for properties over 32767 bytes or a host not 8 or 20 bytes, OverflowError for an int32\n"
     "field out of range, TypeError for a column that is not bytes."},
    {"pack_columns", mq_pack_columns, METH_VARARGS,
     "pack_columns(sizes, topic, queue, shard, tag) -> bytes: a producer batch's COLUMNS rows\n"
     "(mqstore.engine.batch.record_batch), little-endian: size <i4 (sizes: int64), topic <u2, queue <i4, shard <i4,\n"
     "tag <i4, each of the four an int for every record or a sequence of one int per record. OverflowError\n"
     "for a value outside its field, ValueError for a sequence of another length."},
    {"uniq_keys", mq_uniq_keys, METH_VARARGS,
     "uniq_keys(head, counter, count) -> list[str]: count UNIQ_KEYs (mqstore.engine.log.msgid), each head (an ASCII str:\n"
     "the generator's prefix and month span in hex) then the 16-bit counter in four uppercase hex digits, from\n"
     "counter on, wrapping at 65536. ValueError for a head that is not ASCII, a negative count or a counter\n"
     "outside 16 bits."},
    {"index_select", mq_index_select, METH_VARARGS,
     "index_select(header, slots, entries, keys, begin_ms, end_ms) -> (pages, next_nos): keys is an int64\n"
     "array of 3 rows, key_hashes, wants and from_nos; walk key i's chain in one index file (its 40-byte\n"
     "header, its slots, its entries) from entry from_nos[i] (0: the head of its slot) and take the offsets\n"
     "of up to wants[i] entries whose hash is key_hashes[i] stored in [begin_ms, end_ms], newest first:\n"
     "pages[i], a list of ints, and next_nos[i] the entry to read next (0: the chain has ended).\n"
     "IndexFile.selectPhyOffset's stops; a chain that does not go down ends. ValueError when keys is not\n"
     "3 rows, a want is negative or over 2**24, or the buffers are not an index file's parts."},
    {"record_columns", mq_record_columns, METH_VARARGS,
     "record_columns(data, starts, limit, checks, out) -> (valid_count, code): the columns of the records\n"
     "at starts (int64) into out, an int64 matrix of RecordColumns' 22 fields by len(starts) (bytes past\n"
     "data's end read as zeros); valid_count leads up to the first record whose layout is broken, or that\n"
     "fails checks (1: its topic is not UTF-8, 2: its CRCs, 4: with 2, a record without the __CRC32#\n"
     "property fails), and code says why (record_columns.py's REASONS; 12: ask decode_record). No record\n"
     "may pass limit. ValueError on a negative start, a limit outside data, or out of another size."},
    {"scan_records", mq_scan_records, METH_VARARGS,
     "scan_records(data, pos, stop_pos, max_rows, checks, out) -> (count, pos, why, code): walk the chain of\n"
     "records from pos (each size says where the next starts) and write the columns of each (as\n"
     "record_columns, rows of max_rows) until max_rows (why 0), stop_pos (1), a blank record's magic (2) or\n"
     "a position that holds no record, one whose layout is broken or that fails checks (3, code as\n"
     "record_columns'); pos is where the walk stopped. ValueError on a pos outside data or out of another\n"
     "size."},
    {"pull_records", mq_pull_records, METH_VARARGS,
     "pull_records(entries, codes, readable_end, max_count, max_bytes, count, total_bytes, first_row, queue_offset,\n"
     "data, file_base, file_end, written_pos, checks, tags, tag_ends)\n"
     "-> (data, queue_offsets, phys_offsets, sizes, (filtered, unreadable, next_row, other_phys)):\n"
     "go over consume-queue entries (20-byte rows, row r at queue_offset + r) from first_row as a pull does,\n"
     "with count messages and total_bytes already taken: stop at an entry whose record passes readable_end, or\n"
     "(once something is taken) that would pass max_count or max_bytes. An entry whose tags code is not in\n"
     "codes (int64; empty: every code) is filtered. Any other entry's record must lie in the file: data, the\n"
     "bytes of phys offsets [file_base, file_end) written up to written_pos; the first that does not stops the\n"
     "call (other_phys: its phys offset, else None). The record is unreadable unless it lies below\n"
     "written_pos and its size field is the entry's size (8 or more) and its magic a record's; with checks\n"
     "1 or 2, unless mqstore.engine.log.record.decode_record(check_crc=False) decodes it. With checks 2, one whose TAGS\n"
     "property (as decode_properties reads it) is none of the UTF-8 tags, tags[tag_ends[t - 1]:tag_ends[t]],\n"
     "is filtered. The rest are taken: their bytes back to back, their columns as lists. next_row: the row\n"
     "after the last one gone over. ValueError when entries are not whole rows, first_row is outside them,\n"
     "the file's bounds do not fit data or tag_ends leave tags or go back."},
    {"index_probe", mq_index_probe, METH_VARARGS,
     "index_probe(header, slots, entries, file_pos, file_count, walk, stop, begin_ms, end_ms, hashes, wants, places,\n"
     "from_nos, cand_keys, cand_phys, count) -> (count, wanting): one index file (file_pos of file_count, newest\n"
     "first) probed for every key of a query. Key i walks it when wants[i] > 0 and places[i] == file_pos: with\n"
     "walk, its chain from entry from_nos[i] (0: the head of its slot), taking the offsets of up to wants[i]\n"
     "entries whose hash is hashes[i]'s index_hash (abs, Integer.MIN_VALUE as 0: a Java hash or an index hash)\n"
     "stored in [begin_ms, end_ms] (index_select's walk), appended at row count\n"
     "of cand_phys, i at the same row of cand_keys; wants[i] goes down by as many, and places[i], from_nos[i]\n"
     "to the entry to read next, else to (file_pos + 1, 0). With stop (the file began before begin_ms), every\n"
     "key placed after file_pos gets file_count: no older file is walked. Returns the new count of candidates\n"
     "and how many keys still want offsets (0 after a file that stops the walk: no file is left to walk).\n"
     "The arrays are int64, the four key columns\n"
     "of one length, the two candidate columns of another; ValueError when they do not fit, a want is negative\n"
     "or the candidate columns have no room for what the keys walking this file want."},
    {"keys_holding", mq_keys_holding, METH_VARARGS,
     "keys_holding(files, file_bases, limits, low, cand_keys, cand_phys, count, topic, prefix, keys, key_ends,\n"
     "whole, max_count, taken_counts, taken_min, taken, n_taken, places, file_count, page, wants) -> (n_taken,\n"
     "short): a key query's candidates, in order,\n"
     "each (key cand_keys[c], phys offset cand_phys[c]) taken when its key has taken fewer than max_count\n"
     "(taken_counts), its offset is at least low and lies in one of the commitlog files (files: a list of their\n"
     "buffers, file_bases ascending), a record starts there (a size of at least 8 within the file's limits[f]\n"
     "bytes, a magic) of topic whose property prefix (0x02, its name, 0x01) holds key k, keys[key_ends[k - 1]:\n"
     "key_ends[k]], as its whole value (whole) or one of its space-separated words (the test the Python of tests/oracle/lookup.py matching makes),\n"
     "and the key has not taken that record already. A taken record is appended at row n_taken of taken\n"
     "(int64, 5 a row: key, phys offset, file, position in it, size), taken_counts[k] counts it and taken_min[k]\n"
     "is the lowest offset key k took. Then the next round: wants[k] = min(max_count - taken_counts[k], page)\n"
     "for each key short of max_count whose walk has files left (places[k] < file_count), else 0. Returns the\n"
     "new n_taken and how many keys are short. ValueError when the arguments do not fit\n"
     "together, a candidate is of no key or taken has no room left."},
    {"key_records", mq_key_records, METH_VARARGS,
     "key_records(files, taken, n_taken, n_keys) -> (data, queue_offsets, phys_offsets, sizes, counts): the\n"
     "first n_taken rows of taken (keys_holding's, sorted here in place by key, then phys offset) as one query's\n"
     "answer: every record copied out of its file (files: a list of buffers) into data, each key's oldest first,\n"
     "one key after another; each record's queue offset (its QUEUEOFFSET field), phys offset and size as lists\n"
     "of ints; counts[k] how many key k has, for each of the n_keys keys. ValueError for a row of no key or one\n"
     "that leaves its file or cannot hold a record's queue offset."},
    {"java_hash", mq_java_hash, METH_O,
     "java_hash(s) -> int: Java String.hashCode(s), a signed int, over its UTF-16 code units (a character\n"
     "outside the BMP as its surrogate pair, a lone surrogate as itself); TypeError for a non-str."},
    {"java_hashes", mq_java_hashes, METH_VARARGS,
     "java_hashes(strings, out): out[i] = Java String.hashCode(strings[i]) (a signed int) over its UTF-16\n"
     "code units; strings a list of str, out an int64 array as long; TypeError for an item not a str."},
    {"index_key_hashes", mq_index_key_hashes, METH_VARARGS,
     "index_key_hashes(topics, topic_codes, text, bounds, key_rows, key_hashes) -> count: the index keys of\n"
     "records given by topic code (int64s indexing the list topics) and key text (text: UTF-8 bytes, bounds:\n"
     "2n + 1 int32s, record r's UNIQ_KEY text[bounds[2r]:bounds[2r + 1]], its KEYS up to bounds[2r + 2]):\n"
     "each record's UNIQ_KEY, then its KEYS split on single spaces, empty tokens dropped, written as its row\n"
     "into key_rows and index_hash('topic#key') over the decoded text's UTF-16 units into key_hashes (int64\n"
     "arrays of one length); ValueError for a topic code out of range, bounds that go back or leave text,\n"
     "text that is not UTF-8 or more keys than the outputs hold, TypeError for a topic not a str."},
    {"key_text", mq_key_text, METH_VARARGS,
     "key_text(uniq_keys, keys, bounds) -> bytes: the key text of n records (lists of str, '' for none):\n"
     "each record's UNIQ_KEY then its KEYS as UTF-8, one after another, and their 2n + 1 bounds written into\n"
     "bounds (int32s); TypeError for an item not a str, ValueError for lists or bounds of other lengths."},
    {"key_text_join", mq_key_text_join, METH_VARARGS,
     "key_text_join(texts, bounds, out) -> bytes: the key texts of consecutive parts as one: each part's\n"
     "text[bounds[0]:bounds[-1]] joined, its bounds (2n + 1 int32s, any start) moved to where that lands and\n"
     "written into out (int32s: every part's records, one more); ValueError for a part whose bounds are not\n"
     "2n + 1, go back or leave its text, or an out of another length."},
    {"key_text_check", mq_key_text_check, METH_VARARGS,
     "key_text_check(text, bounds, n) -> None: ValueError unless bounds (int32s, any alignment) are 2n + 1,\n"
     "the first at least 0, none going back, none past text, and every span they cut valid UTF-8."},
    {"index_put", mq_index_put, METH_VARARGS,
     "index_put(header, slots, entries, key_hashes, phys_offsets, store_ms) -> count: IndexFile.putKey of\n"
     "each key in order into an index file's header (40 B), slots (4 B each) and entries (20 B each),\n"
     "as many as fit; entries first, then the header's begin and counts, the slots, the end offset and time.\n"
     "The inputs are int64 arrays of one length; ValueError for a negative phys offset, a key hash outside\n"
     "[0, 2**31 - 1] or buffers that are not an index file's, before anything is written."},
    {"cq_entries", mq_cq_entries, METH_VARARGS,
     "cq_entries(rows, entries, queue_offsets, queues) -> (queue_count, entry_count, min_phys_offset):\n"
     "the consume-queue entries of DISPATCH_COLUMNS rows (prepared and rolled-back transactions get none),\n"
     "grouped by queue in ascending (topic << 32 | queue_id) order, commitlog order within a queue: 20-byte\n"
     "big-endian entries into entries (20 B a row), each one's queue offset into queue_offsets (a row each),\n"
     "and queue q's row of 8 into queues (8 a row): topic code, queue id, its entries [first, end), the\n"
     "queue offset of its first entry and its last's + 1, its first entry's phys offset and its last's\n"
     "phys offset + size (sums wrap as int64); ValueError when rows are not whole rows or outputs mis-sized."},
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
    {"written_rows", mq_written_rows, METH_VARARGS,
     "written_rows(columns, sys_flags, queue_ids, phys_offsets, queue_offsets, tags_codes, store_ms, rows_out)\n"
     "-> bytes: for the first n records of a producer-encoded batch (n: the int64 phys_offsets' length; columns\n"
     "its COLUMNS rows, sys_flags and queue_ids int64s a row), written at phys_offsets with queue_offsets\n"
     "(int64s, n) and store_ms: their DISPATCH_COLUMNS rows into rows_out (46 B each; tags code\n"
     "tags_codes[tag], tag -1 the last entry) and, returned, their REPLY_ROWs (phys offset, queue id, queue\n"
     "offset; 20 B each). ValueError for lengths that do not fit together or a tag outside tags_codes but the last."},
    {"packed_bodies", mq_packed_bodies, METH_VARARGS,
     "packed_bodies(data, begin, sizes) -> (bodies, compressed): the records of a packed pull reply, back to\n"
     "back in data from begin, one of each size (int64s), each checked as mqstore.ipc.wire.messages' decoder checks it: its\n"
     "size field equals its size and its body (BODYLENGTH read where its sys flag's host families put it) lies\n"
     "inside it. bodies: each body as stored (bytes); compressed: the indices whose sys flag has 0x1.\n"
     "ValueError with the decoder's reason for the first record that fails, or when the sizes (each at least\n"
     "8) leave data."},
    {"packed_body_heads", mq_packed_body_heads, METH_VARARGS,
     "packed_body_heads(data, begin, sizes, width) -> (heads, compressed): packed_bodies' checks, then the first\n"
     "width bytes of every body back to back in one bytes object (width zeros for a compressed body, whose\n"
     "head is its inflated body's); ValueError as packed_bodies, or for a body not compressed of fewer bytes."},
    {"packed_extent", mq_packed_extent, METH_VARARGS,
     "packed_extent(sizes) -> (total, short_at): the sum of the int64 sizes of a packed reply's records and the\n"
     "index of the first under 8 bytes (-1: none); ValueError when the sum passes int64."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mqstore.engine._native",
    .m_doc = "mqstore's compiled per-record kernels",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    mq_crc32_init();
    return PyModule_Create(&module);
}
