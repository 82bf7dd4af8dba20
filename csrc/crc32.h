#ifndef FASTMQ_CRC32_H
#define FASTMQ_CRC32_H
#include <stddef.h>
#include <stdint.h>

/* zlib's CRC-32 (reflected polynomial 0xEDB88320), chained like zlib's crc32(). Ours rather than zlib's so
 * that the store can checksum without the GIL and without zlib headers. Folds with PCLMULQDQ when the CPU has
 * it (checked once, at load). */
uint32_t fmq_crc32(uint32_t crc, const void *buf, size_t len);
/* The portable slicing-by-8 path, exposed so that tests can compare both on one machine. */
uint32_t fmq_crc32_portable(uint32_t crc, const void *buf, size_t len);
/* 1 when fmq_crc32 uses PCLMULQDQ. */
int fmq_crc32_hw_available(void);

#endif
