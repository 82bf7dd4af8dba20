/* CRC-32C.
 *
 * Hardware path (x86-64 with SSE4.2): the crc32 instruction has a latency of three cycles but a throughput
 * of one per cycle, so one dependent chain uses a third of the unit. We run three chains over three
 * adjacent blocks and merge them: for a raw (uninverted) CRC register, crc(c, A||B) = shift(c', |B|) ^
 * crc(0, B) where c' = crc(c, A) and shift(x, n) appends n zero bytes. shift is linear over GF(2), so for
 * the two fixed block lengths we use it is four table look-ups (tables built once at load).
 *
 * Portable path: slicing-by-8 tables. Both paths are chosen at load time by CPU feature detection.
 */
#include "crc32c.h"
#include "fastmq_byteorder.h"

#define CRC32C_POLY 0x82F63B78u
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256

static uint32_t crc32c_table[8][256];
static uint32_t long_shift[4][256];
static uint32_t short_shift[4][256];
static int hw_available;

/* Multiply the GF(2) 32x32 matrix `mat` (column i = image of bit i) by the vector `vec`. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1)
            sum ^= *mat;
    return sum;
}

/* out = a after b (apply b first). out must not alias a or b. */
static void gf2_compose(uint32_t *out, const uint32_t *a, const uint32_t *b)
{
    for (int i = 0; i < 32; i++)
        out[i] = gf2_times(a, b[i]);
}

/* Tables for shift(x, nbytes): table[k][b] = operator applied to (b << 8k). */
static void build_shift_tables(uint32_t table[4][256], size_t nbytes)
{
    uint32_t one_bit[32], op[32], tmp[32], result[32];
    one_bit[0] = CRC32C_POLY;
    for (int i = 1; i < 32; i++)
        one_bit[i] = 1u << (i - 1);
    /* op = one zero byte = one_bit^8 */
    memcpy(op, one_bit, sizeof op);
    for (int i = 0; i < 3; i++) {
        gf2_compose(tmp, op, op);
        memcpy(op, tmp, sizeof op);
    }
    /* result = op^nbytes by square-and-multiply */
    for (int i = 0; i < 32; i++)
        result[i] = 1u << i;
    while (nbytes) {
        if (nbytes & 1) {
            gf2_compose(tmp, op, result);
            memcpy(result, tmp, sizeof result);
        }
        gf2_compose(tmp, op, op);
        memcpy(op, tmp, sizeof op);
        nbytes >>= 1;
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            table[k][b] = gf2_times(result, b << (8 * k));
}

static inline uint32_t apply_shift(uint32_t table[4][256], uint32_t crc)
{
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^
           table[2][(crc >> 16) & 0xff] ^ table[3][crc >> 24];
}

__attribute__((constructor)) static void crc32c_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++)
            c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
        crc32c_table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            crc32c_table[k][b] = (crc32c_table[k - 1][b] >> 8) ^ crc32c_table[0][crc32c_table[k - 1][b] & 0xff];
    build_shift_tables(long_shift, LONG_BLOCK);
    build_shift_tables(short_shift, SHORT_BLOCK);
#if defined(__x86_64__)
    __builtin_cpu_init();
    hw_available = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t fmq_crc32c_portable(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint32_t lo = fmq_load_u32le((const char *)p) ^ c;
        uint32_t hi = fmq_load_u32le((const char *)p + 4);
        c = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
            crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
            crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
            crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint64_t c0 = (uint32_t)~crc;
    while (len && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        len--;
    }
    while (len >= 3 * LONG_BLOCK) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + LONG_BLOCK;
        do {
            c0 = _mm_crc32_u64(c0, fmq_load_u64le((const char *)p));
            c1 = _mm_crc32_u64(c1, fmq_load_u64le((const char *)p + LONG_BLOCK));
            c2 = _mm_crc32_u64(c2, fmq_load_u64le((const char *)p + 2 * LONG_BLOCK));
            p += 8;
        } while (p < end);
        c0 = apply_shift(long_shift, (uint32_t)c0) ^ c1;
        c0 = apply_shift(long_shift, (uint32_t)c0) ^ c2;
        p += 2 * LONG_BLOCK;
        len -= 3 * LONG_BLOCK;
    }
    while (len >= 3 * SHORT_BLOCK) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + SHORT_BLOCK;
        do {
            c0 = _mm_crc32_u64(c0, fmq_load_u64le((const char *)p));
            c1 = _mm_crc32_u64(c1, fmq_load_u64le((const char *)p + SHORT_BLOCK));
            c2 = _mm_crc32_u64(c2, fmq_load_u64le((const char *)p + 2 * SHORT_BLOCK));
            p += 8;
        } while (p < end);
        c0 = apply_shift(short_shift, (uint32_t)c0) ^ c1;
        c0 = apply_shift(short_shift, (uint32_t)c0) ^ c2;
        p += 2 * SHORT_BLOCK;
        len -= 3 * SHORT_BLOCK;
    }
    while (len >= 8) {
        c0 = _mm_crc32_u64(c0, fmq_load_u64le((const char *)p));
        p += 8;
        len -= 8;
    }
    while (len--)
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return ~(uint32_t)c0;
}
#endif

int fmq_crc32c_hw_available(void)
{
    return hw_available;
}

uint32_t fmq_crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
    if (hw_available)
        return crc32c_sse42(crc, buf, len);
#endif
    return fmq_crc32c_portable(crc, buf, len);
}
