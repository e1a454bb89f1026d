/* Slice-by-8 CRC-32: eight 256-entry tables, the second to eighth advance the first by one to seven
 * bytes, so the loop folds eight input bytes per step. Same result as zlib.crc32. */
#include "crc32.h"

static uint32_t table[8][256];

void mq_crc32_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        table[0][i] = c;
    }
    for (int i = 0; i < 256; i++) {
        for (int s = 1; s < 8; s++) {
            table[s][i] = (table[s - 1][i] >> 8) ^ table[0][table[s - 1][i] & 0xFFu];
        }
    }
}

static inline uint32_t load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t mq_crc32(const uint8_t *data, size_t length) {
    uint32_t c = 0xFFFFFFFFu;
    while (length >= 8) {
        uint32_t a = c ^ load_le32(data);
        uint32_t b = load_le32(data + 4);
        c = table[7][a & 0xFFu] ^ table[6][(a >> 8) & 0xFFu] ^ table[5][(a >> 16) & 0xFFu] ^ table[4][a >> 24]
            ^ table[3][b & 0xFFu] ^ table[2][(b >> 8) & 0xFFu] ^ table[1][(b >> 16) & 0xFFu] ^ table[0][b >> 24];
        data += 8;
        length -= 8;
    }
    while (length--) {
        c = table[0][(c ^ *data++) & 0xFFu] ^ (c >> 8);
    }
    return ~c;
}
