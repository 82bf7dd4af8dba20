#include "murmur2.h"
#include "fastmq_byteorder.h"

int32_t fmq_kafka_murmur2(const void *key, size_t len)
{
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    const unsigned char *data = key;
    /* Java computes with int arithmetic; unsigned gives the same bits without signed overflow. */
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    size_t words = len / 4;
    for (size_t i = 0; i < words; i++) {
        uint32_t k = fmq_load_u32le((const char *)data + 4 * i);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * words;
    switch (len & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}
