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

#endif
