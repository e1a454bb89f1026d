/* The index's writes: the keys of records (engine/keyindex/keys.py) and the puts into an index file
 * (hash slots, chained 20-byte entries and the header's counters, as engine/keyindex/buckets.py's
 * docstring and engine/keyindex/index_file.py's byte table say). */
#include <stdlib.h>
#include <string.h>

#include "bigendian.h"
#include "jhash.h"
#include "kernels.h"

enum { HEADER_SIZE = 40, SLOT_SIZE = 4, ENTRY_SIZE = 20 };
enum { BEGIN_MS = 0, END_MS = 8, BEGIN_PHYS = 16, END_PHYS = 24, SLOT_USED = 32, INDEX_COUNT = 36 };

/* timeDiff of an entry stored at store_ms in a file that begins at begin_ms: whole seconds since
 * it, clamped to [0, 2^31 - 1]; 0 while begin_ms <= 0. */
static int32_t time_diff_s(int64_t store_ms, int64_t begin_ms) {
    if (begin_ms <= 0) {
        return 0;
    }
    int64_t since = ((store_ms > begin_ms ? store_ms : begin_ms) - begin_ms) / 1000;
    return since > INT32_MAX ? INT32_MAX : (int32_t)since;
}

/* Which entry of the batch last took each slot: open addressing over a power-of-two table. */
typedef struct {
    int64_t slot;   /* -1: free */
    int64_t number;
} SlotHead;

static SlotHead *slot_head(SlotHead *table, size_t mask, int64_t slot) {
    size_t i = mq_probe_start((uint64_t)slot, mask);
    while (table[i].slot != -1 && table[i].slot != slot) {
        i = (i + 1) & mask;
    }
    return &table[i];
}

#define SLOT_PREFETCH 16 /* keys ahead whose slot is asked for while this one's is read */

PyObject *mq_index_put(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer header, slots, entries, hashes, phys, times;
    if (!PyArg_ParseTuple(args, "w*w*w*y*y*y*", &header, &slots, &entries, &hashes, &phys, &times)) {
        return NULL;
    }
    PyObject *result = NULL;
    SlotHead *table = NULL;
    Py_ssize_t count, n_phys, n_times;
    if (!mq_int64s(&hashes, &count) || !mq_int64s(&phys, &n_phys) || !mq_int64s(&times, &n_times)) {
        goto done;
    }
    if (n_phys != count || n_times != count) {
        PyErr_SetString(PyExc_ValueError, "key_hashes, phys_offsets and store_ms differ in length");
        goto done;
    }
    if (header.len != HEADER_SIZE || slots.len < SLOT_SIZE || slots.len % SLOT_SIZE || entries.len % ENTRY_SIZE) {
        PyErr_SetString(PyExc_ValueError, "header, slots and entries are not an index file's");
        goto done;
    }
    const int64_t *h = hashes.buf, *p = phys.buf, *t = times.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (p[i] < 0) {
            PyErr_Format(PyExc_ValueError, "phys_offset out of range: %lld", (long long)p[i]);
            goto done;
        }
        if (h[i] < 0 || h[i] > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "key hash %lld is not an index hash", (long long)h[i]);
            goto done;
        }
    }
    uint8_t *head = header.buf, *slot_at = slots.buf, *entry_at = entries.buf;
    int64_t slot_count = slots.len / SLOT_SIZE, entry_count = entries.len / ENTRY_SIZE;
    int32_t raw_count = mq_be32(head + INDEX_COUNT);
    int64_t start = raw_count > 0 ? raw_count : 1;  /* IndexHeader.load() reads a count <= 0 as 1 */
    int64_t n = entry_count - start < count ? entry_count - start : count;
    if (n <= 0) {
        result = PyLong_FromLong(0);
        goto done;
    }
    int64_t slot_used = mq_be32(head + SLOT_USED);
    size_t mask = mq_table_mask(n);
    table = malloc((mask + 1) * sizeof *table);
    if (table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i <= mask; i++) {
        table[i].slot = -1;
    }
    int64_t file_begin_ms = mq_be64(head + BEGIN_MS);
    /* the file's first entry measures from the seed, then becomes the begin */
    int64_t later_begin_ms = start <= 1 ? t[0] : file_begin_ms;
    for (int64_t i = 0; i < n; i++) {  /* entries first: a kill leaves them unreachable at worst */
        if (i + SLOT_PREFETCH < n) {  /* slots are random reads of a table far larger than the caches */
            __builtin_prefetch(slot_at + h[i + SLOT_PREFETCH] % slot_count * SLOT_SIZE);
        }
        int64_t number = start + i, slot = h[i] % slot_count, prev;
        SlotHead *taken = slot_head(table, mask, slot);
        if (taken->slot == slot) {
            prev = taken->number;
        } else {
            int64_t old = mq_be32(slot_at + slot * SLOT_SIZE);
            prev = old > 0 && old <= number ? old : 0;
            taken->slot = slot;
        }
        taken->number = number;
        slot_used += prev == 0;
        uint8_t *e = entry_at + number * ENTRY_SIZE;
        mq_put_be32(e, (uint32_t)h[i]);
        mq_put_be64(e + 4, (uint64_t)p[i]);
        mq_put_be32(e + 12, (uint32_t)time_diff_s(t[i], i == 0 ? file_begin_ms : later_begin_ms));
        mq_put_be32(e + 16, (uint32_t)prev);
    }
    if (start <= 1) {
        mq_put_be64(head + BEGIN_PHYS, (uint64_t)p[0]);
        mq_put_be64(head + BEGIN_MS, (uint64_t)t[0]);
    }
    mq_put_be32(head + INDEX_COUNT, (uint32_t)(start + n));
    mq_put_be32(head + SLOT_USED, (uint32_t)slot_used);
    for (size_t i = 0; i <= mask; i++) {  /* then the slots, then the end */
        if (table[i].slot != -1) {
            mq_put_be32(slot_at + table[i].slot * SLOT_SIZE, (uint32_t)table[i].number);
        }
    }
    mq_put_be64(head + END_PHYS, (uint64_t)p[n - 1]);
    mq_put_be64(head + END_MS, (uint64_t)t[n - 1]);
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(n);
done:
    free(table);
    PyBuffer_Release(&header);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&phys);
    PyBuffer_Release(&times);
    return result;
}

/* Index keys: each record's UNIQ_KEY, then its KEYS split on single spaces with empty tokens dropped,
 * hashed as topic#key; abs() of the Java hash with Integer.MIN_VALUE read as 0. The keys come as key
 * text (engine/csrc/keytext.c); a space byte in UTF-8 is always the character ' '. */
PyObject *mq_index_key_hashes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *topics;
    Py_buffer codes, text, bounds, rows_out, hashes_out;
    if (!PyArg_ParseTuple(args, "O!y*y*y*w*w*", &PyList_Type, &topics, &codes, &text, &bounds, &rows_out,
                          &hashes_out)) {
        return NULL;
    }
    PyObject *result = NULL;
    uint32_t *prefix = NULL;  /* the Java hash of each topic followed by '#' */
    Py_ssize_t n, capacity, n_hashes, n_topics = PyList_GET_SIZE(topics);
    if (!mq_int64s(&codes, &n) || !mq_int64s(&rows_out, &capacity) || !mq_int64s(&hashes_out, &n_hashes)) {
        goto done;
    }
    if (n_hashes != capacity) {
        PyErr_SetString(PyExc_ValueError, "key_rows and key_hashes differ in length");
        goto done;
    }
    if (!mq_key_bounds(&text, &bounds, n, 0)) {
        goto done;
    }
    prefix = PyMem_Malloc((size_t)(n_topics ? n_topics : 1) * sizeof *prefix);
    if (prefix == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_topics; i++) {
        PyObject *s = PyList_GET_ITEM(topics, i);
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "topics[%zd] is %.100s, not str", i, Py_TYPE(s)->tp_name);
            goto done;
        }
        prefix[i] = 31u * mq_java_hash_more(0, PyUnicode_KIND(s), PyUnicode_DATA(s), 0, PyUnicode_GET_LENGTH(s)) + '#';
    }
    const int64_t *code = codes.buf;
    const uint8_t *at = text.buf, *b = bounds.buf;
    int64_t *key_rows = rows_out.buf, *key_hashes = hashes_out.buf;
    Py_ssize_t count = 0, bad_row = -1;
    int ok = 1, full = 0;
    MQ_BEGIN_ALLOW_THREADS_IF(text.len)
    int32_t span[3];
    for (Py_ssize_t row = 0; row < n && ok && !full; row++) {
        if (code[row] < 0 || code[row] >= n_topics) {
            bad_row = row;
            break;
        }
        memcpy(span, b + 8 * row, sizeof span);  /* UNIQ_KEY from span[0], KEYS from span[1], to span[2] */
        uint32_t head = prefix[code[row]];
        if (span[1] > span[0]) {  /* the UNIQ_KEY first, spaces and all */
            if (count == capacity) {
                full = 1;
                break;
            }
            key_rows[count] = row;
            key_hashes[count++] = mq_index_hash(mq_java_hash_utf8(head, at + span[0], span[1] - span[0], &ok));
        }
        for (Py_ssize_t start = span[1]; start < span[2] && ok;) {
            const uint8_t *space = memchr(at + start, ' ', (size_t)(span[2] - start));
            Py_ssize_t end = space != NULL ? space - at : span[2];
            if (end > start) {
                if (count == capacity) {
                    full = 1;
                    break;
                }
                key_rows[count] = row;
                key_hashes[count++] = mq_index_hash(mq_java_hash_utf8(head, at + start, end - start, &ok));
            }
            start = end + 1;
        }
    }
    MQ_END_ALLOW_THREADS_IF
    if (bad_row >= 0) {
        PyErr_Format(PyExc_ValueError, "record %zd names topic %lld of %zd", bad_row, (long long)code[bad_row],
                     n_topics);
    } else if (!ok) {
        PyErr_SetString(PyExc_ValueError, "the key text is not UTF-8");
    } else if (full) {
        PyErr_Format(PyExc_ValueError, "more keys than the %zd the outputs hold", capacity);
    } else {
        result = PyLong_FromSsize_t(count);
    }
done:
    PyMem_Free(prefix);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&text);
    PyBuffer_Release(&bounds);
    PyBuffer_Release(&rows_out);
    PyBuffer_Release(&hashes_out);
    return result;
}
