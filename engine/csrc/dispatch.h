/* One DISPATCH_COLUMNS row (engine/batch/dispatch.py), packed little-endian; tests/engine/batch
 * holds these offsets to the numpy dtype. */
#ifndef MQSTORE_DISPATCH_H
#define MQSTORE_DISPATCH_H

#include <stdint.h>
#include <string.h>

enum {
    ROW_PHYS_OFFSET = 0,   /* <i8 */
    ROW_SIZE = 8,          /* <i4 */
    ROW_TOPIC = 12,        /* <u2 */
    ROW_QUEUE_ID = 14,     /* <i4 */
    ROW_QUEUE_OFFSET = 18, /* <i8 */
    ROW_TAGS_CODE = 26,    /* <i8 */
    ROW_STORE_MS = 34,     /* <i8 */
    ROW_SYS_FLAG = 42,     /* <i4 */
    ROW_SIZE_BYTES = 46,
};

static inline int64_t mq_row_i64(const uint8_t *row, int field) {
    int64_t v;
    memcpy(&v, row + field, 8);
    return v;
}

static inline int32_t mq_row_i32(const uint8_t *row, int field) {
    int32_t v;
    memcpy(&v, row + field, 4);
    return v;
}

static inline uint16_t mq_row_u16(const uint8_t *row, int field) {
    uint16_t v;
    memcpy(&v, row + field, 2);
    return v;
}

#endif
