/* The kernels mqstore.engine._native exports, one line each, and the buffer helpers they share. */
#ifndef MQSTORE_KERNELS_H
#define MQSTORE_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "bigendian.h"

/* An int64 array argument: its buffer and its length in elements; 0 and a Python error when its size
 * is not whole int64s. */
int mq_int64s(Py_buffer *view, Py_ssize_t *count);

/* A kernel lets other threads run while it loops only over this many bytes or more: taking the GIL
 * back waits for the thread that took it to give it up (up to the 5 ms switch interval), which
 * costs a small batch far more than its loop (a producer's batch of 100 records waited 300 us
 * for its I/O thread, to encode in 5). */
#define MQ_GIL_FREE_BYTES (1 << 20)
#define MQ_BEGIN_ALLOW_THREADS_IF(bytes) { PyThreadState *mq_save = (bytes) >= MQ_GIL_FREE_BYTES ? PyEval_SaveThread() : NULL;
#define MQ_END_ALLOW_THREADS_IF if (mq_save != NULL) { PyEval_RestoreThread(mq_save); } }

PyObject *mq_crc31_spans(PyObject *self, PyObject *args);
PyObject *mq_gather_spans(PyObject *self, PyObject *args);
PyObject *mq_check_batch(PyObject *self, PyObject *args);
PyObject *mq_stamp_batch(PyObject *self, PyObject *args);
PyObject *mq_group_ranks(PyObject *self, PyObject *args);
PyObject *mq_encode_batch(PyObject *self, PyObject *args);
PyObject *mq_pack_columns(PyObject *self, PyObject *args);
PyObject *mq_uniq_keys(PyObject *self, PyObject *args);
PyObject *mq_index_select(PyObject *self, PyObject *args);
PyObject *mq_record_columns(PyObject *self, PyObject *args);
PyObject *mq_scan_records(PyObject *self, PyObject *args);
PyObject *mq_pull_records(PyObject *self, PyObject *args);
PyObject *mq_index_probe(PyObject *self, PyObject *args);
PyObject *mq_keys_holding(PyObject *self, PyObject *args);
PyObject *mq_key_records(PyObject *self, PyObject *args);
PyObject *mq_java_hash(PyObject *self, PyObject *s);
PyObject *mq_java_hashes(PyObject *self, PyObject *args);
PyObject *mq_index_key_hashes(PyObject *self, PyObject *args);
PyObject *mq_index_put(PyObject *self, PyObject *args);
PyObject *mq_cq_entries(PyObject *self, PyObject *args);
PyObject *mq_dispatch_keys(PyObject *self, PyObject *args);
PyObject *mq_written_rows(PyObject *self, PyObject *args);
PyObject *mq_key_text(PyObject *self, PyObject *args);
PyObject *mq_key_text_check(PyObject *self, PyObject *args);
PyObject *mq_key_text_join(PyObject *self, PyObject *args);
PyObject *mq_packed_bodies(PyObject *self, PyObject *args);
PyObject *mq_packed_body_heads(PyObject *self, PyObject *args);
PyObject *mq_packed_extent(PyObject *self, PyObject *args);

/* Whether bounds are the 2n + 1 int32 key bounds of n records over text (engine/csrc/keytext.c): from
 * 0 or more, never back, within text; with check_utf8, every span UTF-8 too. 0 and a ValueError if not. */
int mq_key_bounds(const Py_buffer *text, const Py_buffer *bounds, Py_ssize_t n, int check_utf8);

/* A key query's commitlog files as its kernels take them (engine/csrc/key_records.c): a list of buffers, each
 * got once a call; mq_files gives 0 and a Python error when files is not a list of n buffers (what it got is
 * still released by mq_files_release). */
typedef struct {
    Py_buffer *views;
    Py_ssize_t count;
} MqFiles;
int mq_files(PyObject *files, Py_ssize_t n, MqFiles *out);
void mq_files_release(MqFiles *files);

/* A key query's taken record, a row of int64s: its key, phys offset, file (an index into the files), position
 * in that file and size. */
#define TAKEN_COLUMNS 5

/* Whether the record at data[pos:] is one mqstore.engine.log.record.decode_record(check_crc=False) decodes, none of
 * it at or past limit (engine/csrc/scan.c); when it is, where its properties lie in data. */
int mq_record_decodes(const uint8_t *data, int64_t len, int64_t pos, int64_t limit, int64_t *props_pos,
                      int64_t *props_len);

/* The kernels' open-addressing tables: one of a power of two entries, at least twice n, is size
 * mq_table_mask(n) + 1; a 64-bit key starts probing at mq_probe_start (Fibonacci hashing). */
static inline size_t mq_table_mask(Py_ssize_t n) {
    size_t size = 1;
    while (size < 2 * (size_t)n) {
        size <<= 1;
    }
    return size - 1;
}

static inline size_t mq_probe_start(uint64_t key, size_t mask) {
    return (size_t)(key * 0x9E3779B97F4A7C15u >> 20) & mask;
}

#endif
