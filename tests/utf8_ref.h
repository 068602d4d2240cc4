/* Reference twin of the library's text check (src/train/tasks.c check_utf8), for
 * the unit tests and the fuzz target: RFC 3629's grammar of well-formed
 * UTF-8 transcribed byte range by byte range, without decoding anything.
 *
 *   UTF8-1 = %x01-7F                      (NUL excluded: not text here)
 *   UTF8-2 = %xC2-DF tail
 *   UTF8-3 = %xE0 %xA0-BF tail / %xE1-EC tail tail / %xED %x80-9F tail /
 *            %xEE-EF tail tail
 *   UTF8-4 = %xF0 %x90-BF tail tail / %xF1-F3 tail tail tail /
 *            %xF4 %x80-8F tail tail
 *   tail   = %x80-BF */
#ifndef BA_UTF8_REF_H
#define BA_UTF8_REF_H

#include <stddef.h>
#include <stdint.h>

static inline int utf8_ref_in(const uint8_t *s, size_t len, size_t i, int lo, int hi)
{
    return i < len && s[i] >= lo && s[i] <= hi;
}

/* 1 when s (len bytes) is well-formed UTF-8 without NUL bytes. */
static inline int utf8_ref_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        int b = s[i];
        /* second byte's range and the number of plain tails after it */
        int lo = 0x80, hi = 0xBF, tails;
        if (b >= 0x01 && b <= 0x7F) {
            i++;
            continue;
        } else if (b >= 0xC2 && b <= 0xDF) {
            tails = 0;
        } else if (b == 0xE0) {
            lo = 0xA0, tails = 1;
        } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
            tails = 1;
        } else if (b == 0xED) {
            hi = 0x9F, tails = 1;
        } else if (b == 0xF0) {
            lo = 0x90, tails = 2;
        } else if (b >= 0xF1 && b <= 0xF3) {
            tails = 2;
        } else if (b == 0xF4) {
            hi = 0x8F, tails = 2;
        } else {
            return 0; /* NUL, 80-C1, F5-FF */
        }
        if (!utf8_ref_in(s, len, i + 1, lo, hi))
            return 0;
        for (int k = 0; k < tails; k++)
            if (!utf8_ref_in(s, len, i + 2 + (size_t)k, 0x80, 0xBF))
                return 0;
        i += 2 + (size_t)tails;
    }
    return 1;
}

#endif
