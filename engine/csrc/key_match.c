/* A key query's candidates compared with their keys in their stored bytes (engine/read/lookup.py query_keys):
 * the index stores only hashes, so each offset it gives is read and checked to be a record of the topic
 * whose KEYS (or UNIQ_KEY) property holds the key, one call for every key's candidates in every commitlog
 * file, each key taking a record once, up to its count. */
#include <string.h>

#include "kernels.h"
#include "record.h"

/* Whether the property value holds key: all of it (whole), or one of its words between single spaces. */
static int value_holds(const uint8_t *value, int64_t n, const uint8_t *key, int64_t k, int whole) {
    if (whole) {
        return n == k && memcmp(value, key, (size_t)k) == 0;
    }
    int64_t word = 0;
    for (int64_t i = 0; i <= n; i++) {
        if (i == n || value[i] == ' ') {
            if (i - word == k && memcmp(value + word, key, (size_t)k) == 0) {
                return 1;
            }
            word = i + 1;
        }
    }
    return 0;
}

/* The record rec[0:n] (its size field already checked) is one decode_record takes, of topic, and its
 * property name (as mq_property_find reads the properties: the last one so named) holds key. */
static int holds(const uint8_t *rec, int64_t n, const Py_buffer *topic, const uint8_t *name, int64_t name_len,
                 const uint8_t *key, int64_t key_len, int whole) {
    MqRecordFields f;
    MqProperty property;
    return mq_record_locate(rec, n, &f) == RECORD_OK && f.topic_len == topic->len &&
           memcmp(rec + f.topic_pos, topic->buf, (size_t)f.topic_len) == 0 &&
           mq_property_find(rec + f.props_pos, f.props_len, name, name_len, &property) &&
           value_holds(property.value, property.value_len, key, key_len, whole);
}

/* Whether key k has taken the record at phys_offset already: below the lowest it took, surely not (a walk
 * goes down the log, so this is the answer but for a damaged index), else a look at what it took. */
static int taken_before(const int64_t *taken, Py_ssize_t n_taken, const int64_t *taken_min, int64_t k,
                        int64_t phys_offset) {
    if (phys_offset < taken_min[k]) {
        return 0;
    }
    for (Py_ssize_t r = 0; r < n_taken; r++) {
        if (taken[TAKEN_COLUMNS * r] == k && taken[TAKEN_COLUMNS * r + 1] == phys_offset) {
            return 1;
        }
    }
    return 0;
}

PyObject *mq_keys_holding(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *files;
    Py_buffer file_bases, limits, cand_keys, cand_phys, topic, prefix, keys, key_ends, taken_counts, taken_min, taken,
        places, wants;
    long long low, count, max_count, n_taken, file_count, page;
    int whole;
    if (!PyArg_ParseTuple(args, "Oy*y*Ly*y*Ly*y*y*y*pLw*w*w*Ly*LLw*", &files, &file_bases, &limits, &low, &cand_keys,
                          &cand_phys, &count, &topic, &prefix, &keys, &key_ends, &whole, &max_count, &taken_counts,
                          &taken_min, &taken, &n_taken, &places, &file_count, &page, &wants)) {
        return NULL;
    }
    PyObject *result = NULL;
    MqFiles mapped = {0};
    Py_ssize_t n_files, n_limits, n_cand, n_cand_phys, n, n_counts, n_min, capacity, n_places, n_wants;
    if (!mq_int64s(&file_bases, &n_files) || !mq_int64s(&limits, &n_limits) || !mq_int64s(&cand_keys, &n_cand) ||
        !mq_int64s(&cand_phys, &n_cand_phys) || !mq_int64s(&key_ends, &n) || !mq_int64s(&taken_counts, &n_counts) ||
        !mq_int64s(&taken_min, &n_min) || !mq_int64s(&taken, &capacity) || !mq_int64s(&places, &n_places) ||
        !mq_int64s(&wants, &n_wants) || !mq_files(files, n_files, &mapped)) {
        goto done;
    }
    capacity /= TAKEN_COLUMNS;
    if (n_limits != n_files || n_cand_phys != n_cand || n_counts != n || n_min != n || n_places != n ||
        n_wants != n || count < 0 || count > n_cand || n_taken < 0 || n_taken > capacity || max_count < 0 || page < 0) {
        PyErr_SetString(PyExc_ValueError, "files, candidates, keys or taken rows do not fit together");
        goto done;
    }
    const uint8_t *name = (const uint8_t *)prefix.buf + 1;  /* the prefix: PROPERTY_SEPARATOR, name, NAME_VALUE_SEPARATOR */
    int64_t name_len = prefix.len - 2;
    if (name_len < 1 || name[-1] != PROPERTY_SEPARATOR || name[name_len] != NAME_VALUE_SEPARATOR) {
        PyErr_SetString(PyExc_ValueError, "a property prefix is its separator, its name and the name's separator");
        goto done;
    }
    const int64_t *base = file_bases.buf, *limit = limits.buf, *k_of = cand_keys.buf, *phys = cand_phys.buf;
    const int64_t *k_end = key_ends.buf;
    for (Py_ssize_t f = 0; f < n_files; f++) {
        if (limit[f] > mapped.views[f].len || (f > 0 && base[f] < base[f - 1])) {
            PyErr_Format(PyExc_ValueError, "file %zd: its limit passes its buffer, or the files are out of order", f);
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (k_end[i] < (i ? k_end[i - 1] : 0) || k_end[i] > keys.len) {
            PyErr_Format(PyExc_ValueError, "key %zd ends at %lld, out of the %zd key bytes", i, (long long)k_end[i],
                         keys.len);
            goto done;
        }
    }
    for (Py_ssize_t c = 0; c < count; c++) {
        if (k_of[c] < 0 || k_of[c] >= n) {
            PyErr_Format(PyExc_ValueError, "candidate %zd is of key %lld, not one of %zd", c, (long long)k_of[c], n);
            goto done;
        }
    }
    int64_t *took = taken_counts.buf, *lowest = taken_min.buf, *rows = taken.buf;
    const uint8_t *key_bytes = keys.buf;
    for (Py_ssize_t c = 0; c < count; c++) {
        int64_t k = k_of[c], at = phys[c];
        if (took[k] >= max_count || at < low) {
            continue;
        }
        Py_ssize_t lo = 0, hi = n_files;  /* the last file beginning at or before at */
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (base[mid] <= at) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo == 0 || at - base[lo - 1] >= mapped.views[lo - 1].len) {
            continue;
        }
        Py_ssize_t f = lo - 1;
        int64_t pos = at - base[f], end_pos = limit[f], from = k ? k_end[k - 1] : 0;
        const uint8_t *data = mapped.views[f].buf;
        if (pos + 8 > end_pos) {
            continue;
        }
        int64_t size = mq_be32(data + pos + TOTALSIZE_POS);
        if (size < 0 || size > end_pos - pos ||
            !holds(data + pos, size, &topic, name, name_len, key_bytes + from, k_end[k] - from, whole) ||
            taken_before(rows, (Py_ssize_t)n_taken, lowest, k, at)) {
            continue;
        }
        if (n_taken >= capacity) {
            PyErr_SetString(PyExc_ValueError, "the taken rows have no room for another record");
            goto done;
        }
        int64_t *row = rows + TAKEN_COLUMNS * n_taken++;
        row[0] = k, row[1] = at, row[2] = f, row[3] = pos, row[4] = size;
        took[k] += 1;
        lowest[k] = at < lowest[k] ? at : lowest[k];
    }
    /* the next round: each key short of max_count whose walk has files left wants up to a page more */
    const int64_t *place = places.buf;
    int64_t *want = wants.buf;
    Py_ssize_t short_keys = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t more = max_count - took[k] < page ? max_count - took[k] : page;
        want[k] = took[k] < max_count && place[k] < file_count ? more : 0;
        short_keys += want[k] > 0;
    }
    result = Py_BuildValue("(Ln)", n_taken, short_keys);
done:
    mq_files_release(&mapped);
    PyBuffer_Release(&file_bases);
    PyBuffer_Release(&limits);
    PyBuffer_Release(&cand_keys);
    PyBuffer_Release(&cand_phys);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&key_ends);
    PyBuffer_Release(&taken_counts);
    PyBuffer_Release(&taken_min);
    PyBuffer_Release(&taken);
    PyBuffer_Release(&places);
    PyBuffer_Release(&wants);
    return result;
}
