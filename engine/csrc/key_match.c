/* A key query's candidates compared with the key in their stored bytes (engine/lookup.py query_by_keys):
 * the index stores only hashes, so each offset it gives is read and checked to be a record of the topic
 * whose KEYS (or UNIQ_KEY) property holds the key, one call for the candidates in one commitlog file. */
#include <string.h>

#include "kernels.h"

#define MAGIC_V1 (-626843481)
#define MAGIC_V2 (-626843477)

/* rec[a:b] as Python slices bytes (a >= 0): its start and length. */
static void py_slice(int64_t n, int64_t a, int64_t b, int64_t *start, int64_t *length) {
    if (b < 0) {
        b = b + n < 0 ? 0 : b + n;
    }
    a = a < n ? a : n;
    b = b < n ? b : n;
    *start = a;
    *length = b > a ? b - a : 0;
}

static const uint8_t *find(const uint8_t *hay, int64_t n, const uint8_t *needle, int64_t k) {
    if (k == 0) {
        return hay;
    }
    for (int64_t i = 0; i + k <= n; i++) {
        if (hay[i] == needle[0] && memcmp(hay + i, needle, (size_t)k) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

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

/* The record rec[0:n] (its size field already checked) is topic's and its property (prefix: 0x02, the
 * name, 0x01) holds key; a length that points past the record means it does not. */
static int holds(const uint8_t *rec, int64_t n, const Py_buffer *topic, const Py_buffer *prefix, const uint8_t *p_key,
                 int64_t key_len, int whole) {
    if (n < 40) {
        return 0;
    }
    int64_t sys_flag = mq_be32(rec + 36);
    int64_t pos = 48 + (sys_flag & 0x10 ? 20 : 8) + 8 + (sys_flag & 0x20 ? 20 : 8) + 12;
    if (pos + 4 > n) {
        return 0;
    }
    int64_t body_len = mq_be32(rec + pos);
    pos += 4 + body_len;
    if (body_len < 0 || pos + 4 > n) {
        return 0;
    }
    int64_t topic_len;
    if (mq_be32(rec + 4) == MAGIC_V1) {
        topic_len = rec[pos];
        pos += 1;
    } else {
        topic_len = mq_be16(rec + pos);
        pos += 2;
    }
    int64_t start, length;
    py_slice(n, pos, pos + topic_len, &start, &length);
    if (length != topic->len || memcmp(rec + start, topic->buf, (size_t)length) != 0 || pos + topic_len + 2 > n) {
        return 0;
    }
    pos += topic_len;
    int64_t props_len = mq_be16(rec + pos);
    py_slice(n, pos + 2, pos + 2 + props_len, &start, &length);
    /* Python prepends the separator to the properties, so a property at their start is found too */
    const uint8_t *props = rec + start, *p_prefix = prefix->buf;
    int64_t k = prefix->len;
    const uint8_t *at;
    if (k > 0 && length >= k - 1 && memcmp(props, p_prefix + 1, (size_t)(k - 1)) == 0 && p_prefix[0] == 2) {
        at = props + (k - 1);
    } else if ((at = find(props, length, p_prefix, k)) != NULL) {
        at += k;
    } else {
        return 0;
    }
    const uint8_t *end = props + length;
    const uint8_t *value_end = memchr(at, 2, (size_t)(end - at));
    return value_holds(at, (value_end ? value_end : end) - at, p_key, key_len, whole);
}

PyObject *mq_records_holding(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, positions, topic, prefix, keys, key_starts, key_ends, sizes;
    long long end_pos;
    int whole;
    if (!PyArg_ParseTuple(args, "y*y*Ly*y*y*y*y*iw*", &data, &positions, &end_pos, &topic, &prefix, &keys,
                          &key_starts, &key_ends, &whole, &sizes)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n, n_starts, n_ends, n_sizes;
    if (!mq_int64s(&positions, &n) || !mq_int64s(&key_starts, &n_starts) || !mq_int64s(&key_ends, &n_ends) ||
        !mq_int64s(&sizes, &n_sizes)) {
        goto done;
    }
    if (n_starts != n || n_ends != n || n_sizes != n) {
        PyErr_SetString(PyExc_ValueError, "positions, key_starts, key_ends and sizes differ in length");
        goto done;
    }
    if (end_pos > data.len) {
        PyErr_Format(PyExc_ValueError, "end %lld passes the %zd-byte buffer", end_pos, data.len);
        goto done;
    }
    const int64_t *at = positions.buf, *k0 = key_starts.buf, *k1 = key_ends.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (k0[i] < 0 || k1[i] < k0[i] || k1[i] > keys.len) {
            PyErr_Format(PyExc_ValueError, "key %zd [%lld, %lld) leaves the %zd key bytes", i, (long long)k0[i],
                         (long long)k1[i], keys.len);
            goto done;
        }
    }
    int64_t *out = sizes.buf;
    const uint8_t *base = data.buf, *key_bytes = keys.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t pos = at[i], size = 0;
        if (pos >= 0 && pos + 8 <= end_pos) {
            size = mq_be32(base + pos);
            int64_t magic = mq_be32(base + pos + 4);
            if (size < 8 || size > end_pos - pos || (magic != MAGIC_V1 && magic != MAGIC_V2) ||
                !holds(base + pos, size, &topic, &prefix, key_bytes + k0[i], k1[i] - k0[i], whole)) {
                size = 0;
            }
        }
        out[i] = size;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&positions);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&key_starts);
    PyBuffer_Release(&key_ends);
    PyBuffer_Release(&sizes);
    return result;
}
