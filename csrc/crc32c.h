#ifndef FASTMQ_CRC32C_H
#define FASTMQ_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), chained like zlib's crc32(): pass 0 to start,
 * or the previous result to continue. Uses SSE4.2 when the CPU has it (checked once, at load). */
uint32_t fmq_crc32c(uint32_t crc, const void *buf, size_t len);
/* The portable slicing-by-8 path, exposed so that tests can compare both on one machine. */
uint32_t fmq_crc32c_portable(uint32_t crc, const void *buf, size_t len);
/* 1 when fmq_crc32c uses the SSE4.2 instruction. */
int fmq_crc32c_hw_available(void);

#endif
