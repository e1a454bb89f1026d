/* The producer's kernel: a batch of records encoded from its columns (mqstore.engine.batch.record_batch's
 * encode_batch), each laid out as mqstore.engine.log.record encodes one, the writer's fields zero:
 *
 *   TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET(0) PHYSOFFSET(0) SYSFLAG BORNTIMESTAMP BORNHOST
 *   STORETIMESTAMP(0) STOREHOST RECONSUMETIMES PREPAREDTXOFFSET(0) BODYLENGTH BODY TOPIC(length field
 *   and bytes, as given) PROPERTIESLENGTH PROPERTIES [__CRC32# tail, digits 0]
 *
 * A record's properties are the concatenation of its pieces in the properties' columns (bytes or str,
 * one per record or one for all), so a producer need not join and encode each record's own.
 *
 * The tuples of the batch hold its bytes objects while the records are written (without the GIL
 * when the batch is big enough, MQ_GIL_FREE_BYTES). */
#include <string.h>

#include "crc32.h"
#include "kernels.h"
#include "record.h"

#define CRC_PLACEHOLDER PROP_CRC_KEY "\x01" "0000000000\x02" /* PROP_CRC_SIZE bytes, sealed by stamp_batch */
#define INT_COLUMNS 5 /* queue id, flag, sys flag, born time, reconsume times */

#define MAX_PROPERTY_COLUMNS 8

typedef struct {
    const uint8_t *body, *part, *born;
    Py_ssize_t body_len, part_len, props_len, born_len;
} Pieces;

/* One piece of a record's properties: bytes, or a str as its UTF-8 (kept by the str). */
static int piece(PyObject *o, const uint8_t **data, Py_ssize_t *len) {
    if (PyBytes_Check(o)) {
        *data = (const uint8_t *)PyBytes_AS_STRING(o);
        *len = PyBytes_GET_SIZE(o);
        return 1;
    }
    if (PyUnicode_Check(o)) {
        *data = (const uint8_t *)PyUnicode_AsUTF8AndSize(o, len);
        return *data != NULL;
    }
    PyErr_SetString(PyExc_TypeError, "properties pieces must be bytes or str");
    return 0;
}

/* The properties' columns (a tuple): each one piece for all records (bytes or str) or one per record.
 * Fills columns[] with what holds them and data/len (n per column); 0 and an error when they do not fit. */
static int property_pieces(PyObject *props, Py_ssize_t n, PyObject **columns, Py_ssize_t *count,
                           const uint8_t **data, Py_ssize_t *len) {
    if (!PyTuple_Check(props) || PyTuple_GET_SIZE(props) < 1 || PyTuple_GET_SIZE(props) > MAX_PROPERTY_COLUMNS) {
        PyErr_Format(PyExc_ValueError, "properties are a tuple of 1 to %d columns", MAX_PROPERTY_COLUMNS);
        return 0;
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(props); j++) {
        PyObject *column = PyTuple_GET_ITEM(props, j);
        int constant = PyBytes_Check(column) || PyUnicode_Check(column);
        columns[j] = constant ? Py_NewRef(column) : PySequence_Tuple(column);
        *count = j + 1;
        if (columns[j] == NULL) {
            return 0;
        }
        if (!constant && PyTuple_GET_SIZE(columns[j]) != n) {
            PyErr_Format(PyExc_ValueError, "%zd properties for %zd bodies", PyTuple_GET_SIZE(columns[j]), n);
            return 0;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (!piece(constant ? column : PyTuple_GET_ITEM(columns[j], i), &data[j * n + i], &len[j * n + i])) {
                return 0;
            }
        }
    }
    return 1;
}

static inline uint8_t *put_bytes(uint8_t *p, const uint8_t *from, Py_ssize_t len) {
    memcpy(p, from, (size_t)len);
    return p + len;
}

/* A column of bytes objects as a tuple (holding them), NULL and TypeError when it is not n of them. */
static PyObject *bytes_column(PyObject *column, Py_ssize_t n, const char *name) {
    PyObject *tuple = PySequence_Tuple(column);
    if (tuple == NULL) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(tuple) != n) {
        PyErr_Format(PyExc_ValueError, "%zd %s for %zd bodies", PyTuple_GET_SIZE(tuple), name, n);
        Py_DECREF(tuple);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(tuple, i))) {
            PyErr_Format(PyExc_TypeError, "%s must be bytes", name);
            Py_DECREF(tuple);
            return NULL;
        }
    }
    return tuple;
}

static inline int fits_int32(int64_t v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

PyObject *mq_encode_batch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *bodies_in, *parts_in, *props_in, *born_in;
    Py_buffer store, ints, sizes_out;
    int prop_crc;
    if (!PyArg_ParseTuple(args, "OOOOy*py*w*", &bodies_in, &parts_in, &props_in, &born_in, &store, &prop_crc, &ints,
                          &sizes_out)) {
        return NULL;
    }
    PyObject *result = NULL, *bodies = NULL, *parts = NULL, *born = NULL, *columns[MAX_PROPERTY_COLUMNS];
    Py_ssize_t k = 0;
    Pieces *pieces = NULL;
    const uint8_t **prop_data = NULL;
    Py_ssize_t *prop_len = NULL;
    Py_ssize_t n = PyObject_Length(bodies_in), n_ints, n_sizes;
    if (n < 0 || !mq_int64s(&ints, &n_ints) || !mq_int64s(&sizes_out, &n_sizes)) {
        goto done;
    }
    if (n_ints != INT_COLUMNS * n || n_sizes != n) {
        PyErr_SetString(PyExc_ValueError, "ints holds 5 int64s a record and sizes one");
        goto done;
    }
    if (store.len != IPV4_HOST_SIZE && store.len != IPV6_HOST_SIZE) {
        PyErr_SetString(PyExc_ValueError, "a store host is 8 or 20 bytes");
        goto done;
    }
    if ((bodies = bytes_column(bodies_in, n, "bodies")) == NULL ||
        (parts = bytes_column(parts_in, n, "topic parts")) == NULL ||
        (born_in != Py_None && (born = bytes_column(born_in, n, "born hosts")) == NULL)) {
        goto done;
    }
    size_t slots = (size_t)(n > 0 ? n : 1) * MAX_PROPERTY_COLUMNS;
    if ((prop_data = PyMem_Malloc(slots * sizeof(*prop_data))) == NULL ||
        (prop_len = PyMem_Malloc(slots * sizeof(*prop_len))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (!property_pieces(props_in, n, columns, &k, prop_data, prop_len)) {
        goto done;
    }
    const int64_t *queue_ids = ints.buf, *flags = queue_ids + n, *sys_flags = flags + n, *born_ms = sys_flags + n,
                  *reconsume = born_ms + n;
    if (n > 0 && (pieces = PyMem_Malloc((size_t)n * sizeof(Pieces))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *sizes = sizes_out.buf, total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Pieces *p = &pieces[i];
        PyObject *b = PyTuple_GET_ITEM(bodies, i), *t = PyTuple_GET_ITEM(parts, i);
        p->body = (const uint8_t *)PyBytes_AS_STRING(b);
        p->body_len = PyBytes_GET_SIZE(b);
        p->part = (const uint8_t *)PyBytes_AS_STRING(t);
        p->part_len = PyBytes_GET_SIZE(t);
        p->props_len = 0;
        for (Py_ssize_t j = 0; j < k; j++) {
            p->props_len += prop_len[j * n + i];
        }
        PyObject *h = born != NULL ? PyTuple_GET_ITEM(born, i) : NULL;
        p->born = h != NULL ? (const uint8_t *)PyBytes_AS_STRING(h) : store.buf;
        p->born_len = h != NULL ? PyBytes_GET_SIZE(h) : store.len;
        if (p->props_len + (prop_crc ? PROP_CRC_SIZE : 0) > MAX_PROPERTIES_SIZE) {
            PyErr_Format(PyExc_ValueError, "properties over %d bytes", MAX_PROPERTIES_SIZE);
            goto done;
        }
        if (p->born_len != IPV4_HOST_SIZE && p->born_len != IPV6_HOST_SIZE) {
            PyErr_SetString(PyExc_ValueError, "a born host is 8 or 20 bytes");
            goto done;
        }
        if (!fits_int32(queue_ids[i]) || !fits_int32(flags[i]) || !fits_int32(reconsume[i]) ||
            p->body_len > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "a queue id, flag, reconsume count or body length is out of int32");
            goto done;
        }
        sizes[i] = mq_record_size(p->born_len, store.len, p->body_len, p->part_len,
                                  p->props_len + (prop_crc ? PROP_CRC_SIZE : 0));
        total += sizes[i];
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (result == NULL) {
        goto done;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    const uint8_t *store_host = store.buf;
    const int64_t v6 = store.len > IPV4_HOST_SIZE ? SYSFLAG_STOREHOST_V6 : 0;
    MQ_BEGIN_ALLOW_THREADS_IF(total)
    for (Py_ssize_t i = 0; i < n; i++) {
        const Pieces *p = &pieces[i];
        int64_t sys_flag = (sys_flags[i] & ~(int64_t)(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)) |
                           (p->born_len > IPV4_HOST_SIZE ? SYSFLAG_BORNHOST_V6 : 0) | v6;
        out = mq_put_be(out, (uint64_t)sizes[i], 4);
        out = mq_put_be(out, (uint32_t)(p->part_len > 1 + MAX_TOPIC_SIZE_V1 ? MAGIC_V2 : MAGIC_V1), 4);
        out = mq_put_be(out, (uint32_t)mq_crc31(p->body, (size_t)p->body_len), 4);
        out = mq_put_be(out, (uint64_t)queue_ids[i], 4);
        out = mq_put_be(out, (uint64_t)flags[i], 4);
        memset(out, 0, 16); /* queue offset, phys offset: the writer's */
        out = mq_put_be(out + 16, (uint64_t)sys_flag, 4);
        out = mq_put_be(out, (uint64_t)born_ms[i], 8);
        out = put_bytes(out, p->born, p->born_len);
        memset(out, 0, 8); /* store time: the writer's */
        out = put_bytes(out + 8, store_host, store.len);
        out = mq_put_be(out, (uint64_t)reconsume[i], 4);
        memset(out, 0, 8); /* prepared transaction offset */
        out = mq_put_be(out + 8, (uint64_t)p->body_len, BODY_LENGTH_SIZE);
        out = put_bytes(out, p->body, p->body_len);
        out = put_bytes(out, p->part, p->part_len);
        out = mq_put_be(out, (uint64_t)(p->props_len + (prop_crc ? PROP_CRC_SIZE : 0)), PROPERTIES_LENGTH_SIZE);
        for (Py_ssize_t j = 0; j < k; j++) {
            out = put_bytes(out, prop_data[j * n + i], prop_len[j * n + i]);
        }
        if (prop_crc) {
            out = put_bytes(out, (const uint8_t *)CRC_PLACEHOLDER, PROP_CRC_SIZE);
        }
    }
    MQ_END_ALLOW_THREADS_IF
done:
    if (PyErr_Occurred()) {
        Py_CLEAR(result);
    }
    PyMem_Free(pieces);
    PyMem_Free(prop_data);
    PyMem_Free(prop_len);
    for (Py_ssize_t j = 0; j < k; j++) {
        Py_XDECREF(columns[j]);
    }
    Py_XDECREF(bodies);
    Py_XDECREF(parts);
    Py_XDECREF(born);
    PyBuffer_Release(&store);
    PyBuffer_Release(&ints);
    PyBuffer_Release(&sizes_out);
    return result;
}

/* One COLUMNS field for every record: an int for all (value) or a sequence of n ints (items), each
 * checked against the field's range. */
typedef struct {
    PyObject *items;
    int64_t value;
} IntColumn;

static int int_column(PyObject *o, Py_ssize_t n, int64_t lo, int64_t hi, const char *name, IntColumn *c) {
    c->items = NULL;
    if (PyLong_Check(o)) {
        c->value = PyLong_AsLongLong(o);
        if (c->value == -1 && PyErr_Occurred()) {
            return 0;
        }
        if (c->value < lo || c->value > hi) {
            PyErr_Format(PyExc_OverflowError, "a %s column value is out of its range", name);
            return 0;
        }
        return 1;
    }
    if ((c->items = PySequence_Fast(o, "a column is an int or a sequence of ints")) == NULL) {
        return 0;
    }
    if (PySequence_Fast_GET_SIZE(c->items) != n) {
        PyErr_Format(PyExc_ValueError, "%zd %s values for %zd records", PySequence_Fast_GET_SIZE(c->items), name, n);
        return 0;
    }
    PyObject **items = PySequence_Fast_ITEMS(c->items);
    for (Py_ssize_t i = 0; i < n; i++) { /* checked here, so that the rows are written from a valid column */
        int64_t v = PyLong_AsLongLong(items[i]);
        if (v == -1 && PyErr_Occurred()) {
            return 0;
        }
        if (v < lo || v > hi) {
            PyErr_Format(PyExc_OverflowError, "a %s column value is out of its range", name);
            return 0;
        }
    }
    return 1;
}

static inline int64_t column_at(const IntColumn *c, Py_ssize_t i) {
    return c->items == NULL ? c->value : PyLong_AsLongLong(PySequence_Fast_ITEMS(c->items)[i]);
}

static inline uint8_t *put_le(uint8_t *p, uint64_t v, int width) {
    for (int b = 0; b < width; b++) {
        p[b] = (uint8_t)(v >> (8 * b));
    }
    return p + width;
}

#define COLUMNS_ROW 18 /* size <i4, topic <u2, queue <i4, shard <i4, tag <i4 */

PyObject *mq_pack_columns(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer sizes_in;
    PyObject *topic_in, *queue_in, *shard_in, *tag_in, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*OOOO", &sizes_in, &topic_in, &queue_in, &shard_in, &tag_in)) {
        return NULL;
    }
    IntColumn columns[4] = {{NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0}};
    Py_ssize_t n;
    if (!mq_int64s(&sizes_in, &n) || !int_column(topic_in, n, 0, UINT16_MAX, "topic", &columns[0]) ||
        !int_column(queue_in, n, INT32_MIN, INT32_MAX, "queue", &columns[1]) ||
        !int_column(shard_in, n, INT32_MIN, INT32_MAX, "shard", &columns[2]) ||
        !int_column(tag_in, n, INT32_MIN, INT32_MAX, "tag", &columns[3])) {
        goto done;
    }
    const int64_t *sizes = sizes_in.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (sizes[i] < 0 || sizes[i] > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "a record size is out of int32");
            goto done;
        }
    }
    if ((result = PyBytes_FromStringAndSize(NULL, n * COLUMNS_ROW)) == NULL) {
        goto done;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        out = put_le(out, (uint64_t)sizes[i], 4);
        out = put_le(out, (uint64_t)column_at(&columns[0], i), 2);
        out = put_le(out, (uint64_t)column_at(&columns[1], i), 4);
        out = put_le(out, (uint64_t)column_at(&columns[2], i), 4);
        out = put_le(out, (uint64_t)column_at(&columns[3], i), 4);
    }
done:
    for (int k = 0; k < 4; k++) {
        Py_XDECREF(columns[k].items);
    }
    PyBuffer_Release(&sizes_in);
    return result;
}
