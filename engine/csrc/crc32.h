/* CRC-32 of RocketMQ's records: zlib's polynomial (0xEDB88320, reflected), by slice-by-8 tables or
 * carry-less folding where the CPU has it (crc32.c). */
#ifndef MQSTORE_CRC32_H
#define MQSTORE_CRC32_H

#include <stddef.h>
#include <stdint.h>

void mq_crc32_init(void);
uint32_t mq_crc32(const uint8_t *data, size_t length);

/* RocketMQ keeps the low 31 bits (UtilAll.crc32 & 0x7FFFFFFF). */
static inline int32_t mq_crc31(const uint8_t *data, size_t length) {
    return (int32_t)(mq_crc32(data, length) & 0x7FFFFFFFu);
}

#endif
