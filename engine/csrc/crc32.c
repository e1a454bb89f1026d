/* CRC-32 of zlib's polynomial (0xEDB88320, reflected): same result as zlib.crc32.
 *
 * Two ways to the same register, chosen once by mq_crc32_init:
 * - slice-by-8: eight 256-entry tables, the second to eighth advance the first by one to seven bytes,
 *   so the loop folds eight input bytes per step (any CPU, any length);
 * - carry-less multiplication (x86-64 with PCLMULQDQ, spans of 64 bytes or more): four 128-bit lanes
 *   fold 64 bytes a step, multiplied by x^(512+-32) mod P, are folded into one lane by x^(128+-32)
 *   mod P, as are the span's remaining whole 16-byte blocks. The lane is then congruent, modulo P,
 *   to everything it replaced, so the tables finish the job on its 16 bytes (from a zero register)
 *   and on the last bytes of the span. About ten times fewer cycles a byte than the tables.
 * tests/engine/log/test_crc_kernel.py holds both to zlib.crc32 at every length and alignment. */
#include "crc32.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MQ_CLMUL 1
#endif

static uint32_t table[8][256];

static inline uint32_t load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The register after `length` more bytes (no inversion on the way in or out). */
static uint32_t crc_tables(uint32_t c, const uint8_t *data, size_t length) {
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
    return c;
}

#ifdef MQ_CLMUL
static int use_clmul;

/* x's two halves multiplied by k's (x^(n+32) and x^(n-32) mod P, bit-reflected), added to next. */
__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i x, __m128i k, __m128i next) {
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* Folds the register c and data[0, length) (length >= 64) down to 16 bytes written to lane; returns
 * how many bytes of data it consumed (a multiple of 16). */
__attribute__((target("pclmul,sse2"))) static size_t fold_lanes(uint32_t c, const uint8_t *data, size_t length,
                                                               uint8_t lane[16]) {
    const __m128i by64 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i by16 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    __m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)data), _mm_cvtsi32_si128((int)c));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(data + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(data + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(data + 48));
    const uint8_t *p = data + 64;
    size_t left = length - 64;
    while (left >= 64) {
        x1 = fold(x1, by64, _mm_loadu_si128((const __m128i *)p));
        x2 = fold(x2, by64, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = fold(x3, by64, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = fold(x4, by64, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        left -= 64;
    }
    x1 = fold(fold(fold(x1, by16, x2), by16, x3), by16, x4);
    while (left >= 16) {
        x1 = fold(x1, by16, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        left -= 16;
    }
    _mm_storeu_si128((__m128i *)lane, x1);
    return (size_t)(p - data);
}
#endif

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
#ifdef MQ_CLMUL
    __builtin_cpu_init();
    use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
#endif
}

uint32_t mq_crc32(const uint8_t *data, size_t length) {
    uint32_t c = 0xFFFFFFFFu;
#ifdef MQ_CLMUL
    if (use_clmul && length >= 64) {
        uint8_t lane[16];
        size_t used = fold_lanes(c, data, length, lane);
        c = crc_tables(0, lane, sizeof lane);
        data += used;
        length -= used;
    }
#endif
    return ~crc_tables(c, data, length);
}
