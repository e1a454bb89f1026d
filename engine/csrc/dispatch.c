/* Dispatch rows and their hashes: Java String.hashCode of Python strings (engine/java/jhash.py), the topic
 * codes, tags codes and index keys of records read off their bytes (engine/batch/dispatch_columns.py), and
 * the dispatch and reply rows of a producer-encoded batch once written (engine/put/plan.py). */
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "jhash.h"
#include "kernels.h"
#include "record.h"

PyObject *mq_java_hashes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *strings;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "O!w*", &PyList_Type, &strings, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n_out, n = PyList_GET_SIZE(strings);
    if (!mq_int64s(&out, &n_out)) {
        goto done;
    }
    if (n_out != n) {
        PyErr_SetString(PyExc_ValueError, "strings and out differ in length");
        goto done;
    }
    int64_t *o = out.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyList_GET_ITEM(strings, i);
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "item %zd is %.100s, not str", i, Py_TYPE(s)->tp_name);
            goto done;
        }
        o[i] = (int32_t)mq_java_hash_more(0, PyUnicode_KIND(s), PyUnicode_DATA(s), 0, PyUnicode_GET_LENGTH(s));
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out);
    return result;
}

PyObject *mq_java_hash(PyObject *self, PyObject *s) {
    (void)self;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "java_hash takes a str, not %.100s", Py_TYPE(s)->tp_name);
        return NULL;
    }
    return PyLong_FromLong((int32_t)mq_java_hash_more(0, PyUnicode_KIND(s), PyUnicode_DATA(s), 0,
                                                      PyUnicode_GET_LENGTH(s)));
}

/* ---- the dispatch columns of records in a buffer (engine/batch/dispatch_columns.py) ---- */

typedef struct {
    const uint8_t *at;
    Py_ssize_t len;  /* -1: absent */
} Span;

static int is_ascii(const uint8_t *at, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < len; i++) {
        if (at[i] & 0x80u) {
            return 0;
        }
    }
    return 1;
}

/* TAGS, KEYS and UNIQ_KEY of RocketMQ's properties text (mq_property_next's rule; a later one replaces
 * an earlier). */
static void read_properties(const uint8_t *at, Py_ssize_t len, Span *tags, Span *keys, Span *uniq) {
    tags->len = keys->len = uniq->len = -1;
    MqProperties it = {at, at + len};
    MqProperty p;
    while (mq_property_next(&it, &p)) {
        Span *which = NULL;
        if (p.name_len == 4 && memcmp(p.name, "TAGS", 4) == 0) {
            which = tags;
        } else if (p.name_len == 4 && memcmp(p.name, "KEYS", 4) == 0) {
            which = keys;
        } else if (p.name_len == 8 && memcmp(p.name, "UNIQ_KEY", 8) == 0) {
            which = uniq;
        }
        if (which != NULL) {
            which->at = p.value;
            which->len = p.value_len;
        }
    }
}

typedef struct {
    uint32_t hash;
    int64_t length, first, code;  /* code -1: free */
} Topic;

PyObject *mq_dispatch_keys(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf, topic_pos, topic_len, props_pos, props_len, schedule, codes, firsts, tags_out, exact_out, rows_out,
        hashes_out;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*w*w*w*w*w*w*", &buf, &topic_pos, &topic_len, &props_pos, &props_len,
                          &schedule, &codes, &firsts, &tags_out, &exact_out, &rows_out, &hashes_out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Topic *table = NULL;
    Py_ssize_t n, counts[7], capacity;
    Py_buffer *columns[] = {&topic_len, &props_pos, &props_len, &codes, &firsts, &tags_out, &exact_out};
    if (!mq_int64s(&topic_pos, &n) || !mq_int64s(&rows_out, &capacity) || !mq_int64s(&hashes_out, &counts[0])) {
        goto done;
    }
    if (counts[0] != capacity) {
        PyErr_SetString(PyExc_ValueError, "key_rows and key_hashes differ in length");
        goto done;
    }
    for (int c = 0; c < 7; c++) {
        if (!mq_int64s(columns[c], &counts[c])) {
            goto done;
        }
        if (counts[c] != n) {
            PyErr_SetString(PyExc_ValueError, "the record columns and outputs differ in length");
            goto done;
        }
    }
    const int64_t *tp = topic_pos.buf, *tl = topic_len.buf, *pp = props_pos.buf, *pl = props_len.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (tp[i] < 0 || tl[i] < 0 || tp[i] > buf.len - tl[i] || pp[i] < 0 || pl[i] < 0 || pp[i] > buf.len - pl[i]) {
            PyErr_Format(PyExc_ValueError, "record %zd's topic or properties leave the %zd-byte buffer", i, buf.len);
            goto done;
        }
    }
    size_t mask = mq_table_mask(n);
    table = malloc((mask + 1) * sizeof *table);
    if (table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *base = buf.buf;
    int64_t *code = codes.buf, *first = firsts.buf, *tags_code = tags_out.buf, *exact = exact_out.buf;
    int64_t *key_rows = rows_out.buf, *key_hashes = hashes_out.buf;
    Py_ssize_t topic_count = 0, key_count = 0;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i <= mask; i++) {
        table[i].code = -1;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        const uint8_t *topic = base + tp[r];
        Span tags, keys, uniq;
        read_properties(base + pp[r], pl[r], &tags, &keys, &uniq);
        exact[r] = !is_ascii(topic, tl[r]) || (tl[r] == schedule.len && memcmp(topic, schedule.buf, (size_t)tl[r]) == 0)
                   || (tags.len > 0 && !is_ascii(tags.at, tags.len)) || (keys.len > 0 && !is_ascii(keys.at, keys.len))
                   || (uniq.len > 0 && !is_ascii(uniq.at, uniq.len));
        code[r] = -1;
        tags_code[r] = 0;
        if (exact[r]) {  /* text Java hashes as UTF-16, or a delayed message's tags code: decoded in Python */
            continue;
        }
        uint32_t topic_hash = mq_java_hash_bytes(0, topic, tl[r]);
        size_t i = mq_probe_start((uint64_t)tl[r] << 32 | topic_hash, mask);
        while (table[i].code != -1 && (table[i].hash != topic_hash || table[i].length != tl[r]
                                       || memcmp(base + tp[table[i].first], topic, (size_t)tl[r]) != 0)) {
            i = (i + 1) & mask;
        }
        if (table[i].code == -1) {
            table[i] = (Topic){topic_hash, tl[r], r, topic_count};
            first[topic_count++] = r;
        }
        code[r] = table[i].code;
        if (tags.len > 0) {
            tags_code[r] = (int32_t)mq_java_hash_bytes(0, tags.at, tags.len);
        }
        uint32_t head = 31u * topic_hash + '#';
        if (uniq.len > 0) {
            if (key_count < capacity) {
                key_rows[key_count] = r;
                key_hashes[key_count] = mq_index_hash(mq_java_hash_bytes(head, uniq.at, uniq.len));
            }
            key_count++;
        }
        for (Py_ssize_t start = 0; keys.len > 0 && start < keys.len;) {
            Py_ssize_t end = start;
            while (end < keys.len && keys.at[end] != ' ') {
                end++;
            }
            if (end > start) {
                if (key_count < capacity) {
                    key_rows[key_count] = r;
                    key_hashes[key_count] = mq_index_hash(mq_java_hash_bytes(head, keys.at + start, end - start));
                }
                key_count++;
            }
            start = end + 1;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("nn", topic_count, key_count);
done:
    free(table);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&topic_pos);
    PyBuffer_Release(&topic_len);
    PyBuffer_Release(&props_pos);
    PyBuffer_Release(&props_len);
    PyBuffer_Release(&schedule);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&firsts);
    PyBuffer_Release(&tags_out);
    PyBuffer_Release(&exact_out);
    PyBuffer_Release(&rows_out);
    PyBuffer_Release(&hashes_out);
    return result;
}

/* ---- the rows of a producer-encoded batch once written (engine/put/plan.py written_rows) ---- */

#define COLUMN_ROW 18   /* COLUMNS: size <i4, topic <u2, queue <i4, shard <i4, tag <i4 */
#define REPLY_ROW_SIZE 20 /* REPLY_ROW: phys_offset <i8, queue_id <i4, queue_offset <i8 */

PyObject *mq_written_rows(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer columns, sys_flags, queue_ids, phys_offsets, queue_offsets, tags_codes, rows_out;
    long long store_ms;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*Lw*", &columns, &sys_flags, &queue_ids, &phys_offsets, &queue_offsets,
                          &tags_codes, &store_ms, &rows_out)) {
        return NULL;
    }
    PyObject *replies = NULL;
    Py_ssize_t n, n_queue_offsets, n_sys, n_queue_ids, n_codes;
    if (!mq_int64s(&phys_offsets, &n) || !mq_int64s(&queue_offsets, &n_queue_offsets) || !mq_int64s(&sys_flags, &n_sys)
        || !mq_int64s(&queue_ids, &n_queue_ids) || !mq_int64s(&tags_codes, &n_codes)) {
        goto done;
    }
    Py_ssize_t total = columns.len / COLUMN_ROW;
    if (columns.len % COLUMN_ROW || n > total || n_sys != total || n_queue_ids != total || n_queue_offsets != n
        || n_codes < 1 || rows_out.len != n * ROW_SIZE_BYTES) {
        PyErr_SetString(PyExc_ValueError, "columns, sys flags and queue ids must be the batch's rows, phys and queue "
                        "offsets its written ones, tags codes its tags' and one more, and rows_out 46 B a written one");
        goto done;
    }
    replies = PyBytes_FromStringAndSize(NULL, n * REPLY_ROW_SIZE);
    if (replies == NULL) {
        goto done;
    }
    const uint8_t *col = columns.buf;
    const int64_t *flag = sys_flags.buf, *qid = queue_ids.buf, *phys = phys_offsets.buf, *qo = queue_offsets.buf,
                  *codes = tags_codes.buf;
    uint8_t *row = rows_out.buf, *reply = (uint8_t *)PyBytes_AS_STRING(replies);
    Py_ssize_t bad = -1;
    for (Py_ssize_t i = 0; i < n; i++, col += COLUMN_ROW, row += ROW_SIZE_BYTES, reply += REPLY_ROW_SIZE) {
        int32_t size, tag, queue_id = (int32_t)qid[i], sys_flag = (int32_t)flag[i];
        memcpy(&size, col, 4);
        memcpy(&tag, col + 14, 4);
        if (tag < -1 || tag >= n_codes - 1) {
            bad = i;
            break;
        }
        int64_t tags_code = codes[tag < 0 ? n_codes - 1 : tag], when = store_ms;
        memcpy(row + ROW_PHYS_OFFSET, &phys[i], 8);
        memcpy(row + ROW_SIZE, &size, 4);
        memcpy(row + ROW_TOPIC, col + 4, 2);
        memcpy(row + ROW_QUEUE_ID, &queue_id, 4);
        memcpy(row + ROW_QUEUE_OFFSET, &qo[i], 8);
        memcpy(row + ROW_TAGS_CODE, &tags_code, 8);
        memcpy(row + ROW_STORE_MS, &when, 8);
        memcpy(row + ROW_SYS_FLAG, &sys_flag, 4);
        memcpy(reply, &phys[i], 8);
        memcpy(reply + 8, &queue_id, 4);
        memcpy(reply + 12, &qo[i], 8);
    }
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "record %zd names a tag outside the batch's %zd", bad, n_codes - 1);
        Py_CLEAR(replies);
    }
done:
    PyBuffer_Release(&columns);
    PyBuffer_Release(&sys_flags);
    PyBuffer_Release(&queue_ids);
    PyBuffer_Release(&phys_offsets);
    PyBuffer_Release(&queue_offsets);
    PyBuffer_Release(&tags_codes);
    PyBuffer_Release(&rows_out);
    return replies;
}
