#include "crc32.h"
#include "fastmq_byteorder.h"

#define CRC32_POLY 0xEDB88320u

/* table[k][b]: CRC of byte b followed by k zero bytes, for slicing-by-8. */
static uint32_t crc32_table[8][256];

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
}

uint32_t fmq_crc32(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
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
    return ~c;
}
