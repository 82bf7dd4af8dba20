#ifndef FASTMQ_CRC32_H
#define FASTMQ_CRC32_H
#include <stddef.h>
#include <stdint.h>

/* zlib's CRC-32 (reflected polynomial 0xEDB88320), chained like zlib's crc32(). Slicing-by-8: ours
 * rather than zlib's so that the store can checksum without the GIL and without zlib headers. */
uint32_t fmq_crc32(uint32_t crc, const void *buf, size_t len);

#endif
