/* RocketMQ's commitlog record, the one layout every kernel reads and writes: its constants, where its
 * variable fields lie (mq_record_locate) and its properties (mq_property_next). engine/log/record.py
 * holds the byte table; tests/engine/log/test_record_header.py holds every constant here to it.
 *
 * Positions are those of a record whose born and store hosts are both IPv4; an IPv6 born host moves
 * STORETIMESTAMP and everything after it HOST_V6_EXTRA further, an IPv6 store host everything after
 * STOREHOST. All integers are big-endian (bigendian.h). */
#ifndef MQSTORE_RECORD_H
#define MQSTORE_RECORD_H

#include <stdint.h>
#include <string.h>

#include "bigendian.h"

#define MAGIC_V1 (-626843481)     /* 0xDAA320A7: a 1-byte TOPICLENGTH */
#define MAGIC_V2 (-626843477)     /* 0xDAA320AB: a 2-byte TOPICLENGTH */
#define BLANK_MAGIC (-875286124)  /* 0xCBD43194: [size][magic] fills a file's tail */
#define END_FILE_MIN_BLANK_SIZE 8

#define TOTALSIZE_POS 0
#define MAGIC_POS 4
#define BODY_CRC_POS 8
#define QUEUE_ID_POS 12
#define FLAG_POS 16
#define QUEUE_OFFSET_POS 20
#define PHYS_OFFSET_POS 28
#define SYSFLAG_POS 36
#define BORN_MS_POS 40
#define BORN_HOST_POS 48
#define STORE_MS_POS 56           /* moves with the born host */
#define STORE_HOST_POS 64         /* moves with the born host */
#define RECONSUME_TIMES_POS 72    /* this and the rest move with both hosts */
#define PREPARED_TX_OFFSET_POS 76
#define BODY_LENGTH_POS 84        /* BODYLENGTH, then the body, TOPICLENGTH, the topic, PROPERTIESLENGTH, them */

#define IPV4_HOST_SIZE 8          /* 4 address bytes and an int port */
#define IPV6_HOST_SIZE 20         /* 16 address bytes and an int port */
#define HOST_V6_EXTRA (IPV6_HOST_SIZE - IPV4_HOST_SIZE)
#define BODY_LENGTH_SIZE 4
#define PROPERTIES_LENGTH_SIZE 2
#define MIN_RECORD_SIZE_V1 91     /* IPv4 hosts, every variable field empty */
#define MIN_RECORD_SIZE_V2 92
#define MAX_PROPERTIES_SIZE 32767 /* PROPERTIESLENGTH is a signed short */
#define MAX_TOPIC_SIZE_V1 127     /* a longer topic takes MAGIC_V2 */

#define SYSFLAG_COMPRESSED 0x1
#define SYSFLAG_MULTI_TAGS 0x2
#define SYSFLAG_TX_PREPARED 0x4
#define SYSFLAG_TX_COMMIT 0x8
#define SYSFLAG_TX_ROLLBACK 0xC
#define SYSFLAG_TX_MASK 0xC
#define SYSFLAG_BORNHOST_V6 0x10
#define SYSFLAG_STOREHOST_V6 0x20

#define NAME_VALUE_SEPARATOR 0x01
#define PROPERTY_SEPARATOR 0x02
#define PROP_CRC_KEY "__CRC32#"
#define PROP_CRC_KEY_SIZE 8
#define PROP_CRC_DIGITS 10        /* the CRC in decimal, least significant digit first */
#define PROP_CRC_SIZE 20          /* the last property: PROP_CRC_KEY, 0x01, the digits, 0x02 */

#define FIXED_FIELDS_SIZE (BODY_LENGTH_POS + BODY_LENGTH_SIZE - 2 * IPV4_HOST_SIZE) /* all but the hosts: 72 */

/* The TOTALSIZE of a record with these hosts' and variable fields' lengths (topic_field_len: the
 * topic's length field and bytes): RocketMQ's calMsgLength. */
static inline int64_t mq_record_size(int64_t born_host_len, int64_t store_host_len, int64_t body_len,
                                     int64_t topic_field_len, int64_t props_len) {
    return FIXED_FIELDS_SIZE + born_host_len + store_host_len + body_len + topic_field_len + PROPERTIES_LENGTH_SIZE +
           props_len;
}

/* Where STORETIMESTAMP and BODYLENGTH lie in a record with this sys flag. */
static inline int64_t mq_record_store_ms_pos(int64_t sys_flag) {
    return STORE_MS_POS + (sys_flag & SYSFLAG_BORNHOST_V6 ? HOST_V6_EXTRA : 0);
}

static inline int64_t mq_record_body_length_pos(int64_t sys_flag) {
    return BODY_LENGTH_POS + (sys_flag & SYSFLAG_BORNHOST_V6 ? HOST_V6_EXTRA : 0) +
           (sys_flag & SYSFLAG_STOREHOST_V6 ? HOST_V6_EXTRA : 0);
}

/* The verdicts of mq_record_locate, in the order it checks: each one is a reason
 * mqstore.engine.log.record.decode_record calls a record corrupt. */
typedef enum {
    RECORD_OK,
    RECORD_MAGIC,      /* neither MAGIC_V1 nor MAGIC_V2 (or the record is shorter than its magic) */
    RECORD_MIN_SIZE,   /* shorter than the least record of its version */
    RECORD_BODY_LEN,   /* BODYLENGTH, or the body, outside the record; or a negative length */
    RECORD_TOPIC_LEN,  /* TOPICLENGTH, or the topic, outside the record; or a negative length */
    RECORD_PROPS_LEN,  /* PROPERTIESLENGTH, or the properties, outside the record; or a negative length */
    RECORD_TOTAL_SIZE, /* the fields end before the record does */
    RECORD_SHORT_HEAD, /* mq_record_body's alone: the record ends before its BODYLENGTH does (which
                        * mq_record_locate, as decode_record, calls RECORD_BODY_LEN) */
} MqRecordVerdict;

/* A record's variable fields, positions from its first byte. */
typedef struct {
    int version; /* 1 or 2: TOPICLENGTH's width in bytes */
    int64_t sys_flag, born_host_len, store_ms_pos, store_host_pos, store_host_len;
    int64_t body_pos, body_len, topic_pos, topic_len, props_pos, props_len;
} MqRecordFields;

/* The hosts' and the body's fields of rec[0, len) (len: the record's length, all of it readable),
 * nothing read outside it: RECORD_OK, RECORD_SHORT_HEAD or RECORD_BODY_LEN. Neither the magic nor
 * the fields after the body are looked at (a packed reply's client reads only the body). */
static inline MqRecordVerdict mq_record_body(const uint8_t *rec, int64_t len, MqRecordFields *f) {
    if (len < SYSFLAG_POS + 4) {
        return RECORD_SHORT_HEAD;
    }
    f->sys_flag = mq_be32(rec + SYSFLAG_POS);
    f->born_host_len = f->sys_flag & SYSFLAG_BORNHOST_V6 ? IPV6_HOST_SIZE : IPV4_HOST_SIZE;
    f->store_host_len = f->sys_flag & SYSFLAG_STOREHOST_V6 ? IPV6_HOST_SIZE : IPV4_HOST_SIZE;
    f->store_ms_pos = mq_record_store_ms_pos(f->sys_flag);
    f->store_host_pos = f->store_ms_pos + (STORE_HOST_POS - STORE_MS_POS);
    int64_t at = mq_record_body_length_pos(f->sys_flag);
    f->body_pos = at + BODY_LENGTH_SIZE;
    if (f->body_pos > len) {
        return RECORD_SHORT_HEAD;
    }
    f->body_len = mq_be32(rec + at);
    if (f->body_len < 0 || f->body_len > len - f->body_pos) {
        return RECORD_BODY_LEN;
    }
    return RECORD_OK;
}

/* The fields of the record rec[0, len) (len: its TOTALSIZE, all of it readable), nothing read outside
 * it. Lengths are read signed, as decode_record reads them, so a negative one fails its field. The
 * fields are filled as far as the verdict got. */
static inline MqRecordVerdict mq_record_locate(const uint8_t *rec, int64_t len, MqRecordFields *f) {
    if (len < MAGIC_POS + 4) {
        return RECORD_MAGIC;
    }
    int32_t magic = mq_be32(rec + MAGIC_POS);
    if (magic != MAGIC_V1 && magic != MAGIC_V2) {
        return RECORD_MAGIC;
    }
    f->version = magic == MAGIC_V1 ? 1 : 2;
    if (len < (f->version == 1 ? MIN_RECORD_SIZE_V1 : MIN_RECORD_SIZE_V2)) {
        return RECORD_MIN_SIZE;
    }
    if (mq_record_body(rec, len, f) != RECORD_OK) {
        return RECORD_BODY_LEN;
    }
    int64_t at = f->body_pos + f->body_len;
    f->topic_pos = at + f->version;
    if (f->topic_pos > len) {
        return RECORD_TOPIC_LEN;
    }
    f->topic_len = f->version == 1 ? (int8_t)rec[at] : mq_be16(rec + at);
    if (f->topic_len < 0 || f->topic_len > len - f->topic_pos) {
        return RECORD_TOPIC_LEN;
    }
    at = f->topic_pos + f->topic_len;
    f->props_pos = at + PROPERTIES_LENGTH_SIZE;
    if (f->props_pos > len) {
        return RECORD_PROPS_LEN;
    }
    f->props_len = mq_be16(rec + at);
    if (f->props_len < 0 || f->props_len > len - f->props_pos) {
        return RECORD_PROPS_LEN;
    }
    return f->props_pos + f->props_len == len ? RECORD_OK : RECORD_TOTAL_SIZE;
}

/* One property: its name and value, neither empty; the value may hold NAME_VALUE_SEPARATORs. */
typedef struct {
    const uint8_t *name, *value;
    int64_t name_len, value_len;
} MqProperty;

/* A walk over a record's properties text: set at to its first byte and end past its last. */
typedef struct {
    const uint8_t *at, *end;
} MqProperties;

/* The next property as RocketMQ's MessageDecoder.string2messageProperties and decode_properties keep
 * it; 0 when there is none left. The one rule: segments end at a PROPERTY_SEPARATOR or at the text's
 * end (a last segment without one counts, and a separator that ends the text adds no segment); the
 * first NAME_VALUE_SEPARATOR splits a segment into name and value; a segment without one, or with an
 * empty name or an empty value, is skipped. A name met twice is yielded twice: the later one holds
 * (mq_property_find). */
static inline int mq_property_next(MqProperties *it, MqProperty *out) {
    while (it->at < it->end) {
        const uint8_t *segment = it->at;
        const uint8_t *stop = memchr(segment, PROPERTY_SEPARATOR, (size_t)(it->end - segment));
        if (stop == NULL) {
            stop = it->end;
            it->at = it->end;
        } else {
            it->at = stop + 1;
        }
        const uint8_t *mark = memchr(segment, NAME_VALUE_SEPARATOR, (size_t)(stop - segment));
        if (mark != NULL && mark > segment && mark + 1 < stop) {
            out->name = segment;
            out->name_len = mark - segment;
            out->value = mark + 1;
            out->value_len = stop - (mark + 1);
            return 1;
        }
    }
    return 0;
}

/* The value of the property name (the last one so named, as a map built from the walk keeps): 1 and
 * *value, or 0 when the properties have none. */
static inline int mq_property_find(const uint8_t *props, int64_t len, const void *name, int64_t name_len,
                                   MqProperty *value) {
    MqProperties it = {props, props + len};
    MqProperty p;
    int found = 0;
    while (mq_property_next(&it, &p)) {
        if (p.name_len == name_len && memcmp(p.name, name, (size_t)name_len) == 0) {
            *value = p;
            found = 1;
        }
    }
    return found;
}

#endif
