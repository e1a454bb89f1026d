/* Java's String.hashCode over a Python str: h = 31 * h + unit over its UTF-16 code units, 32-bit
 * wraparound. A character outside the BMP counts as its surrogate pair, a lone surrogate as itself. */
#ifndef MQSTORE_JHASH_H
#define MQSTORE_JHASH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* h continued over len bytes that are each one code unit (ASCII or Latin-1 text). */
static inline uint32_t mq_java_hash_bytes(uint32_t h, const uint8_t *units, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < len; i++) {
        h = 31u * h + units[i];
    }
    return h;
}

/* The index's key hash of a Java hash: abs() of it, Integer.MIN_VALUE (whose abs overflows) read as 0. */
static inline int64_t mq_index_hash(uint32_t h) {
    int32_t s = (int32_t)h;
    return s == INT32_MIN ? 0 : (s < 0 ? -(int64_t)s : s);
}

/* h continued over text[start:end] (code point indexes) of a str; ready (PEP 393) strings only. */
static inline uint32_t mq_java_hash_more(uint32_t h, int kind, const void *data, Py_ssize_t start,
                                         Py_ssize_t end) {
    if (kind == PyUnicode_1BYTE_KIND) {
        h = mq_java_hash_bytes(h, (const uint8_t *)data + start, end - start);
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const uint16_t *units = data;
        for (Py_ssize_t i = start; i < end; i++) {
            h = 31u * h + units[i];
        }
    } else {
        const uint32_t *points = data;
        for (Py_ssize_t i = start; i < end; i++) {
            uint32_t cp = points[i];
            if (cp > 0xFFFFu) {
                h = 31u * h + (0xD800u + ((cp - 0x10000u) >> 10));
                h = 31u * h + (0xDC00u + ((cp - 0x10000u) & 0x3FFu));
            } else {
                h = 31u * h + cp;
            }
        }
    }
    return h;
}

/* A UTF-8 lead byte as Python's strict decoder reads it: how many bytes its sequence takes (*need) and
 * the range its second byte must fall in (*lo, *hi: no overlong forms, no surrogates, nothing past
 * U+10FFFF); 0 for a byte that starts no multi-byte sequence (ASCII included). */
static inline int mq_utf8_lead(uint8_t b, Py_ssize_t *need, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80u;
    *hi = 0xBFu;
    if (b >= 0xC2u && b <= 0xDFu) {
        *need = 2;
    } else if (b >= 0xE0u && b <= 0xEFu) {
        *need = 3;
        *lo = b == 0xE0u ? 0xA0u : 0x80u;
        *hi = b == 0xEDu ? 0x9Fu : 0xBFu;
    } else if (b >= 0xF0u && b <= 0xF4u) {
        *need = 4;
        *lo = b == 0xF0u ? 0x90u : 0x80u;
        *hi = b == 0xF4u ? 0x8Fu : 0xBFu;
    } else {
        return 0;
    }
    return 1;
}

/* One code point of UTF-8 text at ``at`` (``len`` bytes left, at least 1): its length in bytes, 0 when
 * the bytes are not UTF-8 as Python's strict decoder reads it (no overlong forms, no surrogates, nothing
 * past U+10FFFF). */
static inline Py_ssize_t mq_utf8_next(const uint8_t *at, Py_ssize_t len, uint32_t *cp) {
    uint8_t b = at[0];
    if (b < 0x80u) {
        *cp = b;
        return 1;
    }
    Py_ssize_t need;
    uint8_t lo, hi;  /* the second byte's range */
    if (!mq_utf8_lead(b, &need, &lo, &hi)) {
        return 0;
    }
    *cp = b & (need == 2 ? 0x1Fu : need == 3 ? 0x0Fu : 0x07u);
    if (len < need || at[1] < lo || at[1] > hi) {
        return 0;
    }
    for (Py_ssize_t k = 1; k < need; k++) {
        if (k > 1 && (at[k] & 0xC0u) != 0x80u) {
            return 0;
        }
        *cp = *cp << 6 | (at[k] & 0x3Fu);
    }
    return need;
}

/* h continued over UTF-8 text as Java hashes the string it decodes to (its UTF-16 units); *ok = 0 and
 * the hash so far when the bytes are not UTF-8. ASCII runs cost a byte each, as mq_java_hash_bytes. */
static inline uint32_t mq_java_hash_utf8(uint32_t h, const uint8_t *at, Py_ssize_t len, int *ok) {
    for (Py_ssize_t i = 0; i < len;) {
        uint32_t cp;
        if (at[i] < 0x80u) {
            h = 31u * h + at[i++];
            continue;
        }
        Py_ssize_t step = mq_utf8_next(at + i, len - i, &cp);
        if (step == 0) {
            *ok = 0;
            return h;
        }
        if (cp > 0xFFFFu) {
            h = 31u * h + (0xD800u + ((cp - 0x10000u) >> 10));
            h = 31u * h + (0xDC00u + ((cp - 0x10000u) & 0x3FFu));
        } else {
            h = 31u * h + cp;
        }
        i += step;
    }
    return h;
}

#endif
