/* A pull's records in one call per commitlog file (engine/read/lookup.py get_messages): the pass over
 * consume-queue entries that keeps what the tag filter and the pull's limits let through, each kept
 * entry's record checked where it is stored, and the records that hold copied out with their columns.
 * Entries are the consume queue's 20-byte rows (engine/consumequeue/consume_queue.py has the byte table),
 * records engine/log/record.py's. */
#include <stdlib.h>
#include <string.h>

#include "jhash.h"
#include "kernels.h"
#include "record.h"

#define CQ_ENTRY_SIZE 20
#define CHECK_DECODES 1 /* the record decodes (decode_record, check_crc=False) */
#define CHECK_TAGS 2    /* and its TAGS is one of the filter's tags (two tags may share a code) */

static int code_wanted(int64_t code, const int64_t *codes, Py_ssize_t n_codes) {
    if (n_codes == 0) {
        return 1;
    }
    for (Py_ssize_t k = 0; k < n_codes; k++) {
        if (codes[k] == code) {
            return 1;
        }
    }
    return 0;
}

/* The length of the bytes at `at` (not UTF-8 there) that Python's decoder with errors="replace" turns
 * into one U+FFFD: a lead byte and the continuation bytes that fit it (the "maximal subpart"). */
static Py_ssize_t bad_run(const uint8_t *at, Py_ssize_t len) {
    uint8_t lo, hi;
    Py_ssize_t need;
    if (!mq_utf8_lead(at[0], &need, &lo, &hi)) {
        return 1;
    }
    if (len < 2 || at[1] < lo || at[1] > hi) {
        return 1;
    }
    Py_ssize_t k = 2;
    while (k < need && k < len && (at[k] & 0xC0u) == 0x80u) {
        k++;
    }
    return k;
}

static const uint8_t REPLACEMENT[3] = {0xEF, 0xBF, 0xBD};

/* Whether value, decoded as decode_properties decodes it (UTF-8, errors="replace"), is the text tag
 * (UTF-8). */
static int decodes_to(const uint8_t *value, Py_ssize_t n, const uint8_t *tag, Py_ssize_t k) {
    if (n == k && memcmp(value, tag, (size_t)n) == 0) {
        return 1; /* tag is UTF-8, so value is, and decodes to it */
    }
    Py_ssize_t i = 0, j = 0;
    while (i < n) {
        uint32_t cp;
        Py_ssize_t step = value[i] < 0x80u ? 1 : mq_utf8_next(value + i, n - i, &cp);
        const uint8_t *out = step ? value + i : REPLACEMENT;
        Py_ssize_t out_len = step ? step : 3;
        if (j + out_len > k || memcmp(tag + j, out, (size_t)out_len) != 0) {
            return 0;
        }
        i += step ? step : bad_run(value + i, n - i);
        j += out_len;
    }
    return j == k;
}

/* Whether the properties' TAGS (mq_property_find: the last property so named) is one of the n_tags
 * tags, tags[ends[t - 1]:ends[t]]. */
static int tags_wanted(const uint8_t *props, int64_t n, const uint8_t *tags, const int64_t *ends,
                       Py_ssize_t n_tags) {
    MqProperty value = {NULL, NULL, 0, 0};
    if (!mq_property_find(props, n, "TAGS", 4, &value)) {
        return 0;
    }
    for (Py_ssize_t t = 0; t < n_tags; t++) {
        int64_t start = t ? ends[t - 1] : 0;
        if (decodes_to(value.value, value.value_len, tags + start, ends[t] - start)) {
            return 1;
        }
    }
    return 0;
}

typedef struct {
    const uint8_t *data; /* the file's bytes: phys offsets [base, end) of the log, written up to written_pos */
    int64_t len, base, end, written_pos;
    int checks;
    const uint8_t *tags;
    const int64_t *tag_ends;
    Py_ssize_t n_tags;
} File;

/* Whether the size-byte record that an entry puts at phys_offset (in the file) is there as stored: its size
 * field and magic, and with checks that it decodes (then *props_pos and *props_len say where its
 * properties lie in the file). */
static int record_holds(const File *f, int64_t phys_offset, int64_t size, int64_t *props_pos, int64_t *props_len) {
    int64_t pos = phys_offset - f->base;
    if (size < MAGIC_POS + 4 || pos > f->written_pos - size || mq_be32(f->data + pos + TOTALSIZE_POS) != size) {
        return 0;
    }
    int64_t magic = mq_be32(f->data + pos + MAGIC_POS);
    if (magic != MAGIC_V1 && magic != MAGIC_V2) {
        return 0;
    }
    return !(f->checks & (CHECK_DECODES | CHECK_TAGS)) || mq_record_decodes(f->data, f->len, pos, pos + size, props_pos, props_len);
}

static int tag_ends_valid(const Py_buffer *tags, const int64_t *ends, Py_ssize_t n) {
    for (Py_ssize_t t = 0; t < n; t++) {
        if (ends[t] < (t ? ends[t - 1] : 0) || ends[t] > tags->len) {
            PyErr_Format(PyExc_ValueError, "tag %zd ends at %lld, outside the %zd tag bytes or before the last",
                         t, (long long)ends[t], tags->len);
            return 0;
        }
    }
    return 1;
}

/* The records of the kept rows, back to back, and their queue offsets, phys offsets and sizes. */
static PyObject *records_out(const File *f, const uint8_t *entries, const int64_t *kept, Py_ssize_t n_kept,
                             int64_t queue_offset, PyObject *counts) {
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < n_kept; k++) {
        total += mq_be32(entries + CQ_ENTRY_SIZE * kept[k] + 8);
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    PyObject *columns[3] = {PyList_New(n_kept), PyList_New(n_kept), PyList_New(n_kept)};
    if (data == NULL || columns[0] == NULL || columns[1] == NULL || columns[2] == NULL) {
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n_kept; k++) {
        const uint8_t *entry = entries + CQ_ENTRY_SIZE * kept[k];
        int64_t values[3] = {queue_offset + kept[k], mq_be64(entry), mq_be32(entry + 8)};
        for (int c = 0; c < 3; c++) {
            PyObject *value = PyLong_FromLongLong(values[c]);
            if (value == NULL) {
                goto fail;
            }
            PyList_SET_ITEM(columns[c], k, value);
        }
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    MQ_BEGIN_ALLOW_THREADS_IF(total)
    for (Py_ssize_t k = 0; k < n_kept; k++) {
        const uint8_t *entry = entries + CQ_ENTRY_SIZE * kept[k];
        int64_t size = mq_be32(entry + 8);
        memcpy(out, f->data + (mq_be64(entry) - f->base), (size_t)size);
        out += size;
    }
    MQ_END_ALLOW_THREADS_IF
    return Py_BuildValue("(NNNNN)", data, columns[0], columns[1], columns[2], counts);
fail:
    Py_XDECREF(data);
    for (int c = 0; c < 3; c++) {
        Py_XDECREF(columns[c]);
    }
    Py_DECREF(counts);
    return NULL;
}

PyObject *mq_pull_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer entries, codes, data, tags, tag_ends;
    long long readable_end, max_bytes, total_bytes, queue_offset, file_base, file_end, written_pos;
    Py_ssize_t max_count, count, first_row;
    int checks;
    if (!PyArg_ParseTuple(args, "y*y*LnLnLnLy*LLLiy*y*", &entries, &codes, &readable_end, &max_count, &max_bytes,
                          &count, &total_bytes, &first_row, &queue_offset, &data, &file_base, &file_end,
                          &written_pos, &checks, &tags, &tag_ends)) {
        return NULL;
    }
    PyObject *result = NULL;
    int64_t *kept = NULL;
    Py_ssize_t n_codes, n_tags;
    if (!mq_int64s(&codes, &n_codes) || !mq_int64s(&tag_ends, &n_tags) ||
        !tag_ends_valid(&tags, tag_ends.buf, n_tags)) {
        goto done;
    }
    if (entries.len % CQ_ENTRY_SIZE != 0) {
        PyErr_SetString(PyExc_ValueError, "entries are not whole 20-byte consume-queue entries");
        goto done;
    }
    Py_ssize_t n_entries = entries.len / CQ_ENTRY_SIZE;
    if (first_row < 0 || first_row > n_entries || count < 0) {
        PyErr_Format(PyExc_ValueError, "first row %zd of %zd entries, count %zd", first_row, n_entries, count);
        goto done;
    }
    if (written_pos < 0 || written_pos > data.len || file_end < file_base || file_end - file_base < data.len) {
        PyErr_Format(PyExc_ValueError, "a %zd-byte file written to %lld cannot span [%lld, %lld) of the log",
                     data.len, written_pos, file_base, file_end);
        goto done;
    }
    kept = malloc(sizeof(int64_t) * (size_t)(n_entries - first_row + 1));
    if (kept == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    File f = {data.buf, data.len, file_base, file_end, written_pos, checks, tags.buf, tag_ends.buf, n_tags};
    const uint8_t *entry = (const uint8_t *)entries.buf + (Py_ssize_t)CQ_ENTRY_SIZE * first_row;
    const int64_t *wanted = codes.buf;
    Py_ssize_t n_kept = 0, filtered = 0, unreadable = 0, next_row = first_row;
    int64_t other_phys = 0;
    int other_file = 0;
    MQ_BEGIN_ALLOW_THREADS_IF((n_entries - first_row) * CQ_ENTRY_SIZE)
    for (Py_ssize_t i = first_row; i < n_entries; i++, entry += CQ_ENTRY_SIZE) {
        int64_t phys_offset = mq_be64(entry), size = mq_be32(entry + 8);
        if (phys_offset > readable_end - size) {
            break;
        }
        if (count && (count + 1 > max_count || total_bytes + size > max_bytes)) {
            break;
        }
        if (!code_wanted(mq_be64(entry + 12), wanted, n_codes)) {
            filtered++;
            next_row = i + 1;
            continue;
        }
        if (phys_offset < f.base || phys_offset >= f.end) {
            other_file = 1;
            other_phys = phys_offset;
            break;
        }
        next_row = i + 1;
        int64_t props_pos = 0, props_len = 0;
        if (!record_holds(&f, phys_offset, size, &props_pos, &props_len)) {
            unreadable++;
        } else if (checks & CHECK_TAGS && !tags_wanted(f.data + props_pos, props_len, f.tags, f.tag_ends, f.n_tags)) {
            filtered++;
        } else {
            kept[n_kept++] = i;
            count++;
            total_bytes += size;
        }
    }
    MQ_END_ALLOW_THREADS_IF
    PyObject *counts = other_file ? Py_BuildValue("(nnnL)", filtered, unreadable, next_row, (long long)other_phys)
                                  : Py_BuildValue("(nnnO)", filtered, unreadable, next_row, Py_None);
    if (counts != NULL) {
        result = records_out(&f, entries.buf, kept, n_kept, queue_offset, counts);
    }
done:
    free(kept);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&data);
    PyBuffer_Release(&tags);
    PyBuffer_Release(&tag_ends);
    return result;
}
