/* The writer's kernels over a producer-encoded batch (mqstore.engine.batch.record_batch): the check of every
 * record against its column, and the stamp of the writer's fields into the mapped file.
 *
 * The check reports what tests/oracle/record_batch.py's numpy check reports: the first of its checks
 * (in its order) that any record fails. Each record stops at its own first failure; the batch's
 * verdict is the lowest of them, so the body CRCs are skipped once a record has failed. Record heads
 * are read as the oracle gathers them: a byte past the end of the batch reads as its last byte. */
#include <string.h>

#include "crc32.h"
#include "kernels.h"
#include "record.h"

#define COLUMN_ROW 18 /* COLUMNS: size <i4, topic <u2, queue <i4, shard <i4, tag <i4 */
#define MIN_RECORD BODY_LENGTH_POS /* the oracle's least size of a record in a batch */
#define CLIENT_FLAGS (SYSFLAG_COMPRESSED | SYSFLAG_MULTI_TAGS)
#define CRC_HEAD PROP_CRC_KEY "\x01"
#define CRC_HEAD_SIZE (PROP_CRC_KEY_SIZE + 1)
#define PHYS_END SYSFLAG_POS /* the stamped fixed fields end here */

enum { CHECK_OK, NOT_WHOLE_ROWS, SIZES, TOPIC_ID, TOTALSIZE, MAGIC, SYS_FLAGS, STORE_HOST, BODY_LENGTH,
       TOPIC_WIDTH, TOPIC_BYTES, LENGTHS, CRC_TAIL, SEND_ONLY_PROPERTY, BODY_CRC };

/* Properties only a ``send`` may carry: the send path's put rules (mqstore.engine.put.rewrite) read them and store
 * the message elsewhere (a delay level, a transaction's half, a timer), so a producer-encoded record
 * carrying one is refused. */
static const char *const SEND_ONLY_NAMES[] = {"DELAY", "TRAN_MSG", "TIMER_DELAY_SEC", "TIMER_DELAY_MS",
                                              "TIMER_DELIVER_MS"};

/* Whether a property of ``props[0, len)`` (mq_property_next's: a name and a value, neither empty) is
 * one of SEND_ONLY_NAMES. */
static int has_send_only_property(const uint8_t *props, int64_t len) {
    MqProperties it = {props, props + len};
    MqProperty p;
    while (mq_property_next(&it, &p)) {
        if (p.name[0] == 'D' || p.name[0] == 'T') {
            for (size_t k = 0; k < sizeof SEND_ONLY_NAMES / sizeof SEND_ONLY_NAMES[0]; k++) {
                if ((size_t)p.name_len == strlen(SEND_ONLY_NAMES[k]) &&
                    memcmp(p.name, SEND_ONLY_NAMES[k], (size_t)p.name_len) == 0) {
                    return 1;
                }
            }
        }
    }
    return 0;
}

static inline int32_t le32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* ``width`` bytes of ``buf`` from ``pos``: in place when they are there, else a copy in which every
 * byte past the end is the last byte (numpy's take, mode="clip"). */
static inline const uint8_t *clipped(const uint8_t *buf, int64_t len, int64_t pos, int64_t width, uint8_t *copy) {
    if (pos + width <= len) {
        return buf + pos;
    }
    for (int64_t k = 0; k < width; k++) {
        copy[k] = buf[pos + k < len ? pos + k : len - 1];
    }
    return copy;
}

typedef struct {
    const uint8_t *buf;
    int64_t len;
    const uint8_t *parts; /* every topic's length field and bytes, one after another */
    const int64_t *part_ends;
    const uint8_t *host;
    int64_t host_size, max_body;
    int prop_crc;
} Batch;

/* The first check record [start, end) fails (CHECK_OK when none); ``crc`` says whether to run the
 * body CRC, the last and dearest. Fills the record's store-time position and sys flag. */
static int check_record(const Batch *b, int64_t start, int64_t end, int topic, int crc, int64_t *store_ms_pos,
                        int64_t *sys_flag) {
    uint8_t copy[128], small[PROP_CRC_SIZE];
    /* the head up to and with BODYLENGTH, with a v4 born host and this batch's store host */
    const int64_t narrow = BODY_LENGTH_POS + BODY_LENGTH_SIZE - IPV4_HOST_SIZE + b->host_size;
    const uint8_t *h = clipped(b->buf, b->len, start, narrow + HOST_V6_EXTRA, copy);
    int32_t flags = mq_be32(h + SYSFLAG_POS), magic = mq_be32(h + MAGIC_POS);
    int64_t wide = (flags & SYSFLAG_BORNHOST_V6) ? HOST_V6_EXTRA : 0;
    *store_ms_pos = mq_record_store_ms_pos(flags);
    *sys_flag = flags;
    if (mq_be32(h + TOTALSIZE_POS) != end - start) {
        return TOTALSIZE;
    }
    if (magic != MAGIC_V1 && magic != MAGIC_V2) {
        return MAGIC;
    }
    if ((flags & ~(CLIENT_FLAGS | SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)) != 0 ||
        (flags & SYSFLAG_STOREHOST_V6) != (b->host_size > IPV4_HOST_SIZE ? SYSFLAG_STOREHOST_V6 : 0)) {
        return SYS_FLAGS;
    }
    if (memcmp(h + STORE_HOST_POS + wide, b->host, (size_t)b->host_size) != 0) {
        return STORE_HOST;
    }
    int64_t body_len = mq_be32(h + narrow - BODY_LENGTH_SIZE + wide), body_pos = start + narrow + wide;
    if (body_len < 0 || body_len > b->max_body || body_pos + body_len > end) {
        return BODY_LENGTH;
    }
    int64_t part_start = topic ? b->part_ends[topic - 1] : 0, part_len = b->part_ends[topic] - part_start;
    if ((magic == MAGIC_V2) != (part_len > 1 + MAX_TOPIC_SIZE_V1)) {
        return TOPIC_WIDTH;
    }
    int64_t topic_pos = body_pos + body_len;
    for (int64_t k = 0; k < part_len; k++) {
        int64_t at = topic_pos + k < b->len ? topic_pos + k : b->len - 1;
        if (b->buf[at] != b->parts[part_start + k]) {
            return TOPIC_BYTES;
        }
    }
    int64_t props_len_pos = topic_pos + part_len;
    int64_t props_len = mq_be16(clipped(b->buf, b->len, props_len_pos, PROPERTIES_LENGTH_SIZE, copy));
    if (props_len < 0 || props_len_pos + PROPERTIES_LENGTH_SIZE + props_len != end) {
        return LENGTHS;
    }
    if (b->prop_crc) {
        const uint8_t *tail = clipped(b->buf, b->len, end - PROP_CRC_SIZE, PROP_CRC_SIZE, small);
        if (props_len < PROP_CRC_SIZE || memcmp(tail, CRC_HEAD, CRC_HEAD_SIZE) != 0 ||
            tail[PROP_CRC_SIZE - 1] != PROPERTY_SEPARATOR) {
            return CRC_TAIL;
        }
    }
    if (has_send_only_property(b->buf + props_len_pos + PROPERTIES_LENGTH_SIZE, props_len)) {
        return SEND_ONLY_PROPERTY;
    }
    if (crc && mq_crc31(b->buf + body_pos, (size_t)body_len) != mq_be32(h + BODY_CRC_POS)) {
        return BODY_CRC;
    }
    return CHECK_OK;
}

PyObject *mq_check_batch(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer records, columns, parts, part_ends, host, out;
    int prop_crc;
    long long max_body;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*pLw*", &records, &columns, &parts, &part_ends, &host, &prop_crc, &max_body,
                          &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t topics, out_len;
    Py_ssize_t n = columns.len / COLUMN_ROW;
    if (!mq_int64s(&part_ends, &topics) || !mq_int64s(&out, &out_len)) {
        goto done;
    }
    if (host.len != IPV4_HOST_SIZE && host.len != IPV6_HOST_SIZE) {
        PyErr_SetString(PyExc_ValueError, "a store host is 8 or 20 bytes");
        goto done;
    }
    if (out_len != 3 * n) {
        PyErr_Format(PyExc_ValueError, "out holds %zd int64s, not 3 per record (%zd)", out_len, 3 * n);
        goto done;
    }
    const int64_t *ends = part_ends.buf;
    for (Py_ssize_t t = 0; t < topics; t++) {
        if (ends[t] < (t ? ends[t - 1] : 0) || ends[t] > parts.len) {
            PyErr_SetString(PyExc_ValueError, "topic part ends do not rise within the parts");
            goto done;
        }
    }
    int code = CHECK_OK;
    int64_t detail = 0;
    const uint8_t *col = columns.buf;
    if (columns.len % COLUMN_ROW != 0 || n == 0) {
        code = NOT_WHOLE_ROWS;
    } else {
        int64_t total = 0, min_size = INT32_MAX, max_topic = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t size = le32(col + i * COLUMN_ROW), topic = col[i * COLUMN_ROW + 4] | col[i * COLUMN_ROW + 5] << 8;
            total += size;
            min_size = size < min_size ? size : min_size;
            max_topic = topic > max_topic ? topic : max_topic;
        }
        if (min_size < MIN_RECORD || total != records.len) {
            code = SIZES;
        } else if (max_topic >= topics) {
            code = TOPIC_ID;
        }
    }
    if (code == CHECK_OK) {
        Batch b = {records.buf, records.len, parts.buf, ends, host.buf, host.len, max_body, prop_crc};
        int64_t *starts = out.buf, *store_ms_pos = starts + n, *sys_flags = starts + 2 * n;
        int worst = BODY_CRC + 1;
        int64_t start = 0;
        MQ_BEGIN_ALLOW_THREADS_IF(records.len)
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t end = start + le32(col + i * COLUMN_ROW);
            int topic = col[i * COLUMN_ROW + 4] | col[i * COLUMN_ROW + 5] << 8;
            starts[i] = start;
            int failed = check_record(&b, start, end, topic, worst > BODY_CRC, &store_ms_pos[i], &sys_flags[i]);
            if (failed != CHECK_OK && (failed < worst || (failed == worst && failed == TOPIC_BYTES && topic < detail))) {
                detail = failed == TOPIC_BYTES ? topic : 0;
                worst = failed;
            }
            start = end;
        }
        MQ_END_ALLOW_THREADS_IF
        code = worst > BODY_CRC ? CHECK_OK : worst;
    }
    result = Py_BuildValue("(iL)", code, (long long)detail);
done:
    PyBuffer_Release(&records);
    PyBuffer_Release(&columns);
    PyBuffer_Release(&parts);
    PyBuffer_Release(&part_ends);
    PyBuffer_Release(&host);
    PyBuffer_Release(&out);
    return result;
}

/* The int64 columns of stamp_batch, each one value per record. */
static int same_length(Py_buffer *columns, int count, Py_ssize_t *n) {
    for (int k = 0; k < count; k++) {
        Py_ssize_t m;
        if (!mq_int64s(&columns[k], &m)) {
            return 0;
        }
        if (k == 0) {
            *n = m;
        } else if (m != *n) {
            PyErr_SetString(PyExc_ValueError, "the stamp's columns differ in length");
            return 0;
        }
    }
    return 1;
}

PyObject *mq_stamp_batch(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf, col[6]; /* starts, sizes, store_ms_pos, queue_ids, queue_offsets, phys_offsets */
    long long store_ms;
    int sealed;
    if (!PyArg_ParseTuple(args, "w*y*y*y*y*y*y*Lp", &buf, &col[0], &col[1], &col[2], &col[3], &col[4], &col[5],
                          &store_ms, &sealed)) {
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *crcs = NULL;
    Py_ssize_t n = 0;
    if (!same_length(col, 6, &n)) {
        goto done;
    }
    const int64_t *starts = col[0].buf, *sizes = col[1].buf, *ms_pos = col[2].buf, *queue_ids = col[3].buf,
                  *queue_offsets = col[4].buf, *phys = col[5].buf;
    int64_t stamped_bytes = 0; /* what the loops read and write: whole records when sealed */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (starts[i] < 0 || sizes[i] < PHYS_END || sizes[i] > buf.len - starts[i] || ms_pos[i] < 0 ||
            ms_pos[i] > sizes[i] - 8 || (sealed && sizes[i] < PROP_CRC_SIZE)) {
            PyErr_Format(PyExc_ValueError, "record %zd (at %lld, %lld bytes, store time at %lld) leaves the %zd-byte "
                         "buffer or cannot hold its fields", i, (long long)starts[i], (long long)sizes[i],
                         (long long)ms_pos[i], buf.len);
            goto done;
        }
        stamped_bytes += sealed ? sizes[i] : PHYS_END; /* each size is checked within buf */
    }
    if (sealed && n > 0 && (crcs = PyMem_Malloc((size_t)n * sizeof(int32_t))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint8_t *base = buf.buf;
    MQ_BEGIN_ALLOW_THREADS_IF(stamped_bytes)
    for (Py_ssize_t i = 0; i < n; i++) { /* fields first, then CRCs, then digits: each pass sees the last's bytes */
        uint8_t *r = base + starts[i];
        mq_put_be(r + QUEUE_ID_POS, (uint64_t)queue_ids[i], 4);
        mq_put_be(r + QUEUE_OFFSET_POS, (uint64_t)queue_offsets[i], 8);
        mq_put_be(r + PHYS_OFFSET_POS, (uint64_t)phys[i], 8);
        mq_put_be(r + ms_pos[i], (uint64_t)store_ms, 8);
    }
    if (sealed) {
        for (Py_ssize_t i = 0; i < n; i++) {
            crcs[i] = mq_crc31(base + starts[i], (size_t)(sizes[i] - PROP_CRC_SIZE));
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            uint8_t *digits = base + starts[i] + sizes[i] - PROP_CRC_SIZE + CRC_HEAD_SIZE;
            uint32_t crc = (uint32_t)crcs[i];
            for (int k = 0; k < PROP_CRC_DIGITS; k++) { /* least significant first */
                digits[k] = (uint8_t)('0' + crc % 10);
                crc /= 10;
            }
        }
    }
    MQ_END_ALLOW_THREADS_IF
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(crcs);
    PyBuffer_Release(&buf);
    for (int k = 0; k < 6; k++) {
        PyBuffer_Release(&col[k]);
    }
    return result;
}

/* Records grouped by key (a topic and queue) in order of first appearance, with an open-addressing
 * table twice the batch's size: out holds each record's rank within its group, its group, then per
 * group its first record and its count. */
PyObject *mq_group_ranks(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer keys_in, out;
    if (!PyArg_ParseTuple(args, "y*w*", &keys_in, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    int64_t *slots = NULL;
    Py_ssize_t n, out_len, groups = 0;
    if (!mq_int64s(&keys_in, &n) || !mq_int64s(&out, &out_len)) {
        goto done;
    }
    if (out_len != 4 * n) {
        PyErr_Format(PyExc_ValueError, "out holds %zd int64s, not 4 per record (%zd)", out_len, 4 * n);
        goto done;
    }
    size_t capacity = 16;
    while (capacity < 2 * (size_t)n) {
        capacity <<= 1;
    }
    if ((slots = PyMem_Malloc(capacity * sizeof(int64_t))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *keys = keys_in.buf;
    int64_t *rank = out.buf, *group = rank + n, *first = group + n, *count = first + n;
    MQ_BEGIN_ALLOW_THREADS_IF(n * 32)
    memset(slots, 0xFF, capacity * sizeof(int64_t)); /* -1: empty; else a group */
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h = (uint64_t)keys[i] * 0x9E3779B97F4A7C15u;
        size_t at = (size_t)(h >> 32) & (capacity - 1);
        while (slots[at] >= 0 && keys[first[slots[at]]] != keys[i]) {
            at = (at + 1) & (capacity - 1);
        }
        if (slots[at] < 0) {
            slots[at] = groups;
            first[groups] = i;
            count[groups++] = 0;
        }
        group[i] = slots[at];
        rank[i] = count[slots[at]]++;
    }
    MQ_END_ALLOW_THREADS_IF
    result = PyLong_FromSsize_t(groups);
done:
    PyMem_Free(slots);
    PyBuffer_Release(&keys_in);
    PyBuffer_Release(&out);
    return result;
}
