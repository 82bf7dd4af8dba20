/* zlib's CRC-32.
 *
 * Hardware path (x86-64 with PCLMULQDQ and SSE4.1): carry-less multiplication folds the message 64 bytes at a
 * time into four 128-bit accumulators, then into one, then reduces it to 32 bits (folding by x^n mod P and a
 * Barrett reduction; Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"). The fold
 * constants are x^k mod P for the reflected polynomial, the shift distances the folds need. A tail shorter than
 * 16 bytes, and inputs shorter than 64, go through the tables. The store checksums every message body with this,
 * so it is on the broker's produce path.
 *
 * Portable path: slicing-by-8 tables. The path is chosen at load time by CPU feature detection.
 */
#include "crc32.h"
#include "fastmq_byteorder.h"

#define CRC32_POLY 0xEDB88320u

/* table[k][b]: CRC of byte b followed by k zero bytes, for slicing-by-8. */
static uint32_t crc32_table[8][256];
static int hw_available;

__attribute__((constructor)) static void crc32_build_tables(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++)
            c = (c >> 1) ^ (CRC32_POLY & (0u - (c & 1)));
        crc32_table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            crc32_table[k][b] = (crc32_table[k - 1][b] >> 8) ^ crc32_table[0][crc32_table[k - 1][b] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    hw_available = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

/* The raw (uninverted) CRC register c advanced over len bytes by the tables. */
static uint32_t crc32_tables(uint32_t c, const unsigned char *p, size_t len)
{
    while (len && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ crc32_table[0][(c ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint32_t lo = fmq_load_u32le((const char *)p) ^ c;
        uint32_t hi = fmq_load_u32le((const char *)p + 4);
        c = crc32_table[7][lo & 0xff] ^ crc32_table[6][(lo >> 8) & 0xff] ^
            crc32_table[5][(lo >> 16) & 0xff] ^ crc32_table[4][lo >> 24] ^
            crc32_table[3][hi & 0xff] ^ crc32_table[2][(hi >> 8) & 0xff] ^
            crc32_table[1][(hi >> 16) & 0xff] ^ crc32_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ crc32_table[0][(c ^ *p++) & 0xff];
    return c;
}

uint32_t fmq_crc32_portable(uint32_t crc, const void *buf, size_t len)
{
    return ~crc32_tables(~crc, buf, len);
}

#if defined(__x86_64__)
#include <smmintrin.h>
#include <wmmintrin.h>

/* Folding distances for the reflected polynomial 0xEDB88320: (x^(4*128+32) mod P, x^(4*128-32) mod P) to fold
 * 64 bytes ahead, (x^(128+32), x^(128-32)) to fold 16 bytes ahead, x^64 mod P for the last 64 bits, and the
 * Barrett pair (P with its x^32 term, floor(x^64 / P)). */
#define K1 0x154442bd4ULL
#define K2 0x1c6e41596ULL
#define K3 0x1751997d0ULL
#define K4 0x0ccaa009eULL
#define K5 0x163cd6124ULL
#define POLY 0x1db710641ULL
#define MU 0x1f7011641ULL

__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold(__m128i acc, __m128i k, __m128i next)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)),
                         next);
}

/* The raw register c advanced over len bytes, len a multiple of 16 and at least 64. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc32_pclmul(uint32_t c, const unsigned char *p, size_t len)
{
    const __m128i k12 = _mm_set_epi64x((long long)K2, (long long)K1);
    const __m128i k34 = _mm_set_epi64x((long long)K4, (long long)K3);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)c));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    p += 64;
    len -= 64;
    while (len >= 64) {
        x1 = fold(x1, k12, _mm_loadu_si128((const __m128i *)p));
        x2 = fold(x2, k12, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = fold(x3, k12, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = fold(x4, k12, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        len -= 64;
    }
    x1 = fold(x1, k34, x2);
    x1 = fold(x1, k34, x3);
    x1 = fold(x1, k34, x4);
    while (len >= 16) {
        x1 = fold(x1, k34, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        len -= 16;
    }
    /* 128 -> 64 bits: the low half times x^(128-32), added to the high half. */
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(k34, x1, 0x01));
    /* 64 -> 32 bits (with the 32 zero bits a CRC appends). */
    x2 = _mm_and_si128(x1, mask32);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 4), _mm_clmulepi64_si128(x2, _mm_cvtsi64_si128((long long)K5), 0x00));
    /* Barrett reduction to the 32-bit remainder. */
    const __m128i barrett = _mm_set_epi64x((long long)MU, (long long)POLY);
    x2 = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), barrett, 0x10), mask32);
    x1 = _mm_xor_si128(x1, _mm_clmulepi64_si128(x2, barrett, 0x00));
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

int fmq_crc32_hw_available(void)
{
    return hw_available;
}

uint32_t fmq_crc32(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (hw_available && len >= 64) {
        size_t folded = len & ~(size_t)15;
        c = crc32_pclmul(c, p, folded);
        p += folded;
        len -= folded;
    }
#endif
    return ~crc32_tables(c, p, len);
}
