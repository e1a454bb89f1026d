/* Big-endian loads and stores at any alignment: RocketMQ's files are all big-endian. */
#ifndef MQSTORE_BIGENDIAN_H
#define MQSTORE_BIGENDIAN_H

#include <stdint.h>
#include <string.h>

static inline int16_t mq_be16(const uint8_t *p) {
    return (int16_t)((uint16_t)p[0] << 8 | (uint16_t)p[1]);
}

static inline int32_t mq_be32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (int32_t)__builtin_bswap32(v);
}

static inline int64_t mq_be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return (int64_t)__builtin_bswap64(v);
}

static inline void mq_put_be32(uint8_t *p, uint32_t v) {
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}

static inline void mq_put_be64(uint8_t *p, uint64_t v) {
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

/* Writes the low width bytes of v big-endian at p; returns the byte after them. */
static inline uint8_t *mq_put_be(uint8_t *p, uint64_t v, int width) {
    for (int k = width - 1; k >= 0; k--) {
        p[k] = (uint8_t)v;
        v >>= 8;
    }
    return p + width;
}

#endif
