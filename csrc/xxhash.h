#ifndef FASTMQ_XXHASH_H
#define FASTMQ_XXHASH_H
#include <stddef.h>
#include <stdint.h>

/* XXH32 and XXH64 as specified by the xxHash format description (little-endian lanes). XXH32 is what the
 * LZ4 frame format uses for its header and content checksums; XXH64 keys fastmq's own partitioners. */
uint32_t fmq_xxh32(const void *buf, size_t len, uint32_t seed);
uint64_t fmq_xxh64(const void *buf, size_t len, uint64_t seed);

#endif
