#include "xxhash.h"
#include "fastmq_byteorder.h"

#define P32_1 0x9E3779B1u
#define P32_2 0x85EBCA77u
#define P32_3 0xC2B2AE3Du
#define P32_4 0x27D4EB2Fu
#define P32_5 0x165667B1u

#define P64_1 0x9E3779B185EBCA87ull
#define P64_2 0xC2B2AE3D27D4EB4Full
#define P64_3 0x165667B19E3779F9ull
#define P64_4 0x85EBCA77C2B2AE63ull
#define P64_5 0x27D4EB2F165667C5ull

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint32_t round32(uint32_t acc, uint32_t lane)
{
    return rotl32(acc + lane * P32_2, 13) * P32_1;
}

uint32_t fmq_xxh32(const void *buf, size_t len, uint32_t seed)
{
    const char *p = buf, *end = p + len;
    uint32_t h;
    if (len >= 16) {
        uint32_t v1 = seed + P32_1 + P32_2, v2 = seed + P32_2, v3 = seed, v4 = seed - P32_1;
        const char *limit = end - 16;
        do {
            v1 = round32(v1, fmq_load_u32le(p));
            v2 = round32(v2, fmq_load_u32le(p + 4));
            v3 = round32(v3, fmq_load_u32le(p + 8));
            v4 = round32(v4, fmq_load_u32le(p + 12));
            p += 16;
        } while (p <= limit);
        h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18);
    } else {
        h = seed + P32_5;
    }
    h += (uint32_t)len;
    for (; end - p >= 4; p += 4)
        h = rotl32(h + fmq_load_u32le(p) * P32_3, 17) * P32_4;
    for (; p < end; p++)
        h = rotl32(h + (uint8_t)*p * P32_5, 11) * P32_1;
    h ^= h >> 15;
    h *= P32_2;
    h ^= h >> 13;
    h *= P32_3;
    h ^= h >> 16;
    return h;
}

static inline uint64_t round64(uint64_t acc, uint64_t lane)
{
    return rotl64(acc + lane * P64_2, 31) * P64_1;
}

static inline uint64_t merge64(uint64_t acc, uint64_t v)
{
    return (acc ^ round64(0, v)) * P64_1 + P64_4;
}

uint64_t fmq_xxh64(const void *buf, size_t len, uint64_t seed)
{
    const char *p = buf, *end = p + len;
    uint64_t h;
    if (len >= 32) {
        uint64_t v1 = seed + P64_1 + P64_2, v2 = seed + P64_2, v3 = seed, v4 = seed - P64_1;
        const char *limit = end - 32;
        do {
            v1 = round64(v1, fmq_load_u64le(p));
            v2 = round64(v2, fmq_load_u64le(p + 8));
            v3 = round64(v3, fmq_load_u64le(p + 16));
            v4 = round64(v4, fmq_load_u64le(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = merge64(h, v1);
        h = merge64(h, v2);
        h = merge64(h, v3);
        h = merge64(h, v4);
    } else {
        h = seed + P64_5;
    }
    h += (uint64_t)len;
    for (; end - p >= 8; p += 8)
        h = rotl64(h ^ round64(0, fmq_load_u64le(p)), 27) * P64_1 + P64_4;
    if (end - p >= 4) {
        h = rotl64(h ^ ((uint64_t)fmq_load_u32le(p) * P64_1), 23) * P64_2 + P64_3;
        p += 4;
    }
    for (; p < end; p++)
        h = rotl64(h ^ ((uint8_t)*p * P64_5), 11) * P64_1;
    h ^= h >> 33;
    h *= P64_2;
    h ^= h >> 29;
    h *= P64_3;
    h ^= h >> 32;
    return h;
}
