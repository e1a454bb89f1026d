/* Commitlog records decoded as columns (engine/batch/record_columns.py has the fields, engine/log/record.py
 * the byte table): the layout of each record, its topic's UTF-8, its CRCs, and the walk of the chain of
 * records (each TOTALSIZE says where the next one starts). A record is accepted exactly when
 * mqstore.engine.log.record.decode_record accepts it, or handed back to it (CODE_DECODER). */
#include <string.h>

#include "crc32.h"
#include "kernels.h"
#include "record.h"

#define CHECK_TOPIC 1
#define CHECK_CRC 2
#define REQUIRE_PROP_CRC 4

/* the verdicts, in the order record_columns.py's REASONS names them */
enum { CODE_OK, CODE_MAGIC, CODE_MIN_SIZE, CODE_PAST_END, CODE_BODY_LEN, CODE_TOPIC_LEN, CODE_PROPS_LEN,
       CODE_TOTAL_SIZE, CODE_TOPIC_UTF8, CODE_BODY_CRC, CODE_RECORD_CRC, CODE_PROP_CRC_MISSING, CODE_DECODER };

/* the columns, in RecordColumns' field order */
enum { F_STARTS, F_SIZE, F_VERSION, F_BODY_CRC, F_QUEUE_ID, F_FLAG, F_QUEUE_OFFSET, F_PHYS_OFFSET, F_SYS_FLAG,
       F_BORN_MS, F_BORN_HOST_LEN, F_STORE_MS, F_STORE_HOST_POS, F_STORE_HOST_LEN, F_RECONSUME_TIMES,
       F_PREPARED_TX_OFFSET, F_BODY_POS, F_BODY_LEN, F_TOPIC_POS, F_TOPIC_LEN, F_PROPS_POS, F_PROPS_LEN, FIELDS };

typedef struct {
    const uint8_t *data;
    int64_t len;
} Buf;

/* Big-endian reads where bytes past the buffer's end read as zeros (a broken length points anywhere). */
static int64_t read_be(Buf b, int64_t pos, int width) {
    if (pos >= 0 && pos + width <= b.len) {
        const uint8_t *p = b.data + pos;
        return width == 8 ? mq_be64(p) : width == 4 ? mq_be32(p) : width == 2 ? mq_be16(p) : (int8_t)p[0];
    }
    uint64_t v = 0;
    for (int i = 0; i < width; i++) {
        v = v << 8 | (pos + i >= 0 && pos + i < b.len ? b.data[pos + i] : 0u);
    }
    int shift = 64 - 8 * width;
    return (int64_t)(v << shift) >> shift;
}

/* The fields of a record mq_record_locate refused, as the oracle gathers them: each length read where
 * the one before it puts it, within the buffer or past it (zeros), a negative one counted as empty. */
static void gather_broken(Buf b, int64_t s, int64_t magic, MqRecordFields *f) {
    f->version = magic == MAGIC_V2 ? 2 : 1;
    f->sys_flag = read_be(b, s + SYSFLAG_POS, 4);
    f->born_host_len = f->sys_flag & SYSFLAG_BORNHOST_V6 ? IPV6_HOST_SIZE : IPV4_HOST_SIZE;
    f->store_host_len = f->sys_flag & SYSFLAG_STOREHOST_V6 ? IPV6_HOST_SIZE : IPV4_HOST_SIZE;
    f->store_ms_pos = mq_record_store_ms_pos(f->sys_flag);
    f->store_host_pos = f->store_ms_pos + (STORE_HOST_POS - STORE_MS_POS);
    int64_t at = mq_record_body_length_pos(f->sys_flag);
    f->body_pos = at + BODY_LENGTH_SIZE;
    f->body_len = read_be(b, s + at, 4);
    at = f->body_pos + (f->body_len > 0 ? f->body_len : 0);
    f->topic_len = read_be(b, s + at, f->version);
    f->topic_pos = at + f->version;
    at = f->topic_pos + (f->topic_len > 0 ? f->topic_len : 0);
    f->props_len = read_be(b, s + at, PROPERTIES_LENGTH_SIZE);
    f->props_pos = at + PROPERTIES_LENGTH_SIZE;
}

/* One record's columns into row[f * stride]; its structure verdict. */
static int decode_layout(Buf b, int64_t s, int64_t limit, int64_t *row, Py_ssize_t stride) {
    int64_t size = read_be(b, s, 4), magic = read_be(b, s + MAGIC_POS, 4);
    MqRecordFields f;
    int code = CODE_OK;
    if (magic != MAGIC_V1 && magic != MAGIC_V2) {
        code = CODE_MAGIC;
    } else if (size < (magic == MAGIC_V1 ? MIN_RECORD_SIZE_V1 : MIN_RECORD_SIZE_V2)) {
        code = CODE_MIN_SIZE;
    } else if (s + size > limit) {
        code = CODE_PAST_END;
    } else {
        static const int codes[] = {CODE_OK, CODE_MAGIC, CODE_MIN_SIZE, CODE_BODY_LEN, CODE_TOPIC_LEN, CODE_PROPS_LEN,
                                    CODE_TOTAL_SIZE, CODE_BODY_LEN};
        code = codes[mq_record_locate(b.data + s, size, &f)];
    }
    if (code != CODE_OK) {
        gather_broken(b, s, magic, &f);
    }
#define SET(c, v) (row[(c) * stride] = (v))
    SET(F_STARTS, s);
    SET(F_SIZE, size);
    SET(F_VERSION, f.version);
    SET(F_BODY_CRC, read_be(b, s + BODY_CRC_POS, 4));
    SET(F_QUEUE_ID, read_be(b, s + QUEUE_ID_POS, 4));
    SET(F_FLAG, read_be(b, s + FLAG_POS, 4));
    SET(F_QUEUE_OFFSET, read_be(b, s + QUEUE_OFFSET_POS, 8));
    SET(F_PHYS_OFFSET, read_be(b, s + PHYS_OFFSET_POS, 8));
    SET(F_SYS_FLAG, f.sys_flag);
    SET(F_BORN_MS, read_be(b, s + BORN_MS_POS, 8));
    SET(F_BORN_HOST_LEN, f.born_host_len);
    SET(F_STORE_MS, read_be(b, s + f.store_ms_pos, 8));
    SET(F_STORE_HOST_POS, s + f.store_host_pos);
    SET(F_STORE_HOST_LEN, f.store_host_len);
    SET(F_RECONSUME_TIMES, read_be(b, s + f.store_host_pos + f.store_host_len, 4));
    SET(F_PREPARED_TX_OFFSET, read_be(b, s + f.store_host_pos + f.store_host_len + 4, 8));
    SET(F_BODY_POS, s + f.body_pos);
    SET(F_BODY_LEN, f.body_len);
    SET(F_TOPIC_POS, s + f.topic_pos);
    SET(F_TOPIC_LEN, f.topic_len);
    SET(F_PROPS_POS, s + f.props_pos);
    SET(F_PROPS_LEN, f.props_len);
#undef SET
    return code;
}

/* Whether bytes are UTF-8 as Python's strict decoder takes it: no overlong forms, no surrogates,
 * nothing past U+10FFFF (the Unicode standard's table 3-7). */
static int is_utf8(const uint8_t *p, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int more;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return 0;
        }
        if (i + more >= n) {
            return 0;
        }
        if (p[i + 1] < lo || p[i + 1] > hi) {
            return 0;
        }
        for (int k = 2; k <= more; k++) {
            if (p[i + k] < 0x80 || p[i + k] > 0xBF) {
                return 0;
            }
        }
        i += more + 1;
    }
    return 1;
}

/* The CRC verdict of a record whose layout is valid: decode_record(check_crc=True)'s checks beyond
 * the layout, or CODE_DECODER for properties that hold PROP_CRC_KEY anywhere but in a sealed last one. */
static int check_crcs(Buf b, const int64_t *row, Py_ssize_t stride, int require_prop_crc) {
#define GET(f) (row[(f) * stride])
    int64_t body_pos = GET(F_BODY_POS), body_len = GET(F_BODY_LEN);
    if (body_len > 0 && mq_crc31(b.data + body_pos, (size_t)body_len) != GET(F_BODY_CRC)) {
        return CODE_BODY_CRC;
    }
    int64_t start = GET(F_STARTS), end = start + GET(F_SIZE);
    int64_t props_pos = GET(F_PROPS_POS), props_len = GET(F_PROPS_LEN);
#undef GET
    const uint8_t *tail = b.data + end - PROP_CRC_SIZE, *digits = tail + PROP_CRC_KEY_SIZE + 1;
    if (props_len >= PROP_CRC_SIZE && memcmp(tail, PROP_CRC_KEY, PROP_CRC_KEY_SIZE) == 0 &&
        tail[PROP_CRC_KEY_SIZE] == NAME_VALUE_SEPARATOR && tail[PROP_CRC_SIZE - 1] == PROPERTY_SEPARATOR &&
        (end - PROP_CRC_SIZE == props_pos || tail[-1] == PROPERTY_SEPARATOR)) {
        int64_t stored = 0, weight = 1;
        for (int k = 0; k < PROP_CRC_DIGITS; k++, weight *= 10) {
            if (digits[k] < '0' || digits[k] > '9') {
                return CODE_RECORD_CRC;
            }
            stored += (digits[k] - '0') * weight;
        }
        return mq_crc31(b.data + start, (size_t)(end - PROP_CRC_SIZE - start)) == stored ? CODE_OK : CODE_RECORD_CRC;
    }
    if (require_prop_crc) {
        return CODE_PROP_CRC_MISSING;
    }
    /* any PROP_CRC_KEY, even inside a value: the decoder's rule decides what it means */
    for (int64_t at = props_pos; at + PROP_CRC_KEY_SIZE <= props_pos + props_len; at++) {
        if (b.data[at] == PROP_CRC_KEY[0] && memcmp(b.data + at, PROP_CRC_KEY, PROP_CRC_KEY_SIZE) == 0) {
            return CODE_DECODER;
        }
    }
    return CODE_OK;
}

/* The layout verdict, then (as `checks` asks) the topic's and the CRCs'. */
static int decode_checked(Buf b, int64_t s, int64_t limit, int checks, int64_t *row, Py_ssize_t stride) {
    int code = decode_layout(b, s, limit, row, stride);
    if (code == CODE_OK && checks & CHECK_TOPIC) {
        code = is_utf8(b.data + row[F_TOPIC_POS * stride], row[F_TOPIC_LEN * stride]) ? CODE_OK : CODE_TOPIC_UTF8;
    }
    if (code == CODE_OK && checks & CHECK_CRC) {
        code = check_crcs(b, row, stride, checks & REQUIRE_PROP_CRC);
    }
    return code;
}

int mq_record_decodes(const uint8_t *data, int64_t len, int64_t pos, int64_t limit, int64_t *props_pos,
                      int64_t *props_len) {
    int64_t row[FIELDS];
    Buf b = {data, len};
    if (decode_checked(b, pos, limit, CHECK_TOPIC, row, 1) != CODE_OK) {
        return 0;
    }
    *props_pos = row[F_PROPS_POS];
    *props_len = row[F_PROPS_LEN];
    return 1;
}

/* The output matrix: FIELDS rows of `rows` int64s. */
static int columns_out(Py_buffer *out, Py_ssize_t rows) {
    Py_ssize_t count;
    if (!mq_int64s(out, &count)) {
        return 0;
    }
    if (count != FIELDS * rows) {
        PyErr_Format(PyExc_ValueError, "out holds %zd int64s, not %d columns of %zd", count, FIELDS, rows);
        return 0;
    }
    return 1;
}

PyObject *mq_record_columns(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, starts, out;
    long long limit;
    int checks;
    if (!PyArg_ParseTuple(args, "y*y*Liw*", &data, &starts, &limit, &checks, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n;
    if (!mq_int64s(&starts, &n) || !columns_out(&out, n)) {
        goto done;
    }
    if (limit < 0 || limit > data.len) {
        PyErr_Format(PyExc_ValueError, "limit %lld is outside the %zd-byte buffer", limit, data.len);
        goto done;
    }
    const int64_t *s = starts.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0) {
            PyErr_Format(PyExc_ValueError, "record %zd starts at %lld", i, (long long)s[i]);
            goto done;
        }
    }
    Buf b = {data.buf, data.len};
    int64_t *o = out.buf;
    Py_ssize_t first = n;
    int code = CODE_OK;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int verdict = decode_checked(b, s[i], limit, first == n ? checks : 0, o + i, n);
        if (verdict != CODE_OK && first == n) {
            first = i;
            code = verdict;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(ni)", first, code);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&out);
    return result;
}

enum { WHY_FULL, WHY_END, WHY_BLANK, WHY_BAD };

PyObject *mq_scan_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, out;
    long long pos, stop_pos;
    Py_ssize_t max_rows;
    int checks;
    if (!PyArg_ParseTuple(args, "y*LLniw*", &data, &pos, &stop_pos, &max_rows, &checks, &out)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (max_rows < 0 || !columns_out(&out, max_rows)) {
        if (max_rows < 0) {
            PyErr_SetString(PyExc_ValueError, "max_rows is negative");
        }
        goto done;
    }
    if (pos < 0 || pos > data.len) {
        PyErr_Format(PyExc_ValueError, "position %lld is outside the %zd-byte buffer", pos, data.len);
        goto done;
    }
    Buf b = {data.buf, data.len};
    int64_t *o = out.buf;
    Py_ssize_t count = 0;
    int why = WHY_FULL, code = CODE_OK;
    Py_BEGIN_ALLOW_THREADS
    for (; count < max_rows; count++) {
        if (pos >= stop_pos) {
            why = WHY_END;
            break;
        }
        if (pos + 8 > b.len) {
            why = WHY_BAD;
            break;
        }
        int64_t size = mq_be32(b.data + pos), magic = mq_be32(b.data + pos + 4);
        if (magic == BLANK_MAGIC) {
            why = WHY_BLANK;
            break;
        }
        if ((magic != MAGIC_V1 && magic != MAGIC_V2) || size < MIN_RECORD_SIZE_V1 || pos + size > b.len) {
            why = WHY_BAD;
            break;
        }
        code = decode_checked(b, pos, b.len, checks, o + count, max_rows);
        if (code != CODE_OK) {
            why = WHY_BAD;
            break;
        }
        pos += size;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(nLii)", count, pos, why, code);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}
