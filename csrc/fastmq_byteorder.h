/* Unaligned big- and little-endian loads and stores. memcpy keeps them legal on any alignment; gcc
 * turns each into one mov (+ bswap). */
#ifndef FASTMQ_BYTEORDER_H
#define FASTMQ_BYTEORDER_H

#include <stdint.h>
#include <string.h>

static inline uint16_t fmq_load_u16be(const char *p) { uint16_t v; memcpy(&v, p, 2); return __builtin_bswap16(v); }
static inline uint32_t fmq_load_u32be(const char *p) { uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v); }
static inline uint64_t fmq_load_u64be(const char *p) { uint64_t v; memcpy(&v, p, 8); return __builtin_bswap64(v); }
static inline int16_t fmq_load_i16be(const char *p) { return (int16_t)fmq_load_u16be(p); }
static inline int32_t fmq_load_i32be(const char *p) { return (int32_t)fmq_load_u32be(p); }
static inline int64_t fmq_load_i64be(const char *p) { return (int64_t)fmq_load_u64be(p); }

static inline void fmq_store_u16be(char *p, uint16_t v) { v = __builtin_bswap16(v); memcpy(p, &v, 2); }
static inline void fmq_store_u32be(char *p, uint32_t v) { v = __builtin_bswap32(v); memcpy(p, &v, 4); }
static inline void fmq_store_u64be(char *p, uint64_t v) { v = __builtin_bswap64(v); memcpy(p, &v, 8); }
static inline void fmq_store_i16be(char *p, int16_t v) { fmq_store_u16be(p, (uint16_t)v); }
static inline void fmq_store_i32be(char *p, int32_t v) { fmq_store_u32be(p, (uint32_t)v); }
static inline void fmq_store_i64be(char *p, int64_t v) { fmq_store_u64be(p, (uint64_t)v); }

static inline uint32_t fmq_load_u32le(const char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t fmq_load_u64le(const char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline void fmq_store_u32le(char *p, uint32_t v) { memcpy(p, &v, 4); }

#endif
