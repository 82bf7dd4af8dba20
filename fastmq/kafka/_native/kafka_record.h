/* Parsing of Kafka v2 records (see fastmq/kafka/_native/records.pyx for the format).
 *
 * Header-only and free of Python: parse_record is the inner loop of every record reader (per-record
 * objects, the columnar decoder, the consumer), so it is forced inline into each of those loops, where
 * the record's fields stay in registers. Every function returns the position after what it read, or NULL
 * when the field is malformed or runs past `end`.
 */
#ifndef FASTMQ_KAFKA_RECORD_H
#define FASTMQ_KAFKA_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define FMQ_ALWAYS_INLINE static inline __attribute__((always_inline))
#define FMQ_COLD static __attribute__((noinline, cold, unused))

enum {
    FMQ_RECORD_OK = 0,
    FMQ_RECORD_BAD_VARINT = 1,        /* truncated, or longer than its type allows */
    FMQ_RECORD_BAD_LENGTH = 2,
    FMQ_RECORD_BAD_KEY_LENGTH = 3,
    FMQ_RECORD_BAD_VALUE_LENGTH = 4,
    FMQ_RECORD_BAD_HEADER_COUNT = 5,
    FMQ_RECORD_BAD_HEADERS = 6,
    FMQ_RECORD_SIZE_MISMATCH = 7,
};

typedef struct {
    int32_t size;             /* bytes after the record's length varint */
    int8_t attributes;        /* unused by Kafka so far */
    int64_t timestamp_delta;  /* added to the batch's first timestamp */
    int32_t offset_delta;     /* added to the batch's base offset */
    const char *key;          /* NULL when the key is null */
    ptrdiff_t key_len;        /* -1 when the key is null */
    const char *value;        /* NULL when the value is null */
    ptrdiff_t value_len;      /* -1 when the value is null */
    int32_t header_count;     /* number of headers */
    const char *headers;      /* first byte of the (validated) header region */
    ptrdiff_t headers_len;    /* bytes of the header region */
} fmq_record_view;

FMQ_COLD const char *fmq_take_uvarint_long(const char *p, const char *end, uint64_t *out, int max_len)
{
    const uint8_t *q = (const uint8_t *)p;
    uint64_t result = 0;
    ptrdiff_t n = end - p < max_len ? end - p : max_len;
    for (ptrdiff_t i = 0; i < n; i++) {
        result |= (uint64_t)(q[i] & 0x7F) << (7 * i);
        if (q[i] < 0x80) {
            *out = result;
            return p + i + 1;
        }
    }
    *out = 0;
    return NULL;
}

/* Base-128 varint of at most max_len bytes. One- and two-byte ones (lengths and deltas below 16384) are
 * nearly all of them and stay inline. */
FMQ_ALWAYS_INLINE const char *fmq_take_uvarint(const char *p, const char *end, uint64_t *out, int max_len)
{
    const uint8_t *q = (const uint8_t *)p;
    if (end - p >= 1 && q[0] < 0x80) {
        *out = q[0];
        return p + 1;
    }
    if (end - p >= 2 && q[1] < 0x80) {
        *out = (q[0] & 0x7Fu) | ((uint64_t)q[1] << 7);
        return p + 2;
    }
    return fmq_take_uvarint_long(p, end, out, max_len);
}

/* Zigzag int32 of up to 5 bytes; as Java's readVarint, bits beyond 32 are dropped. */
FMQ_ALWAYS_INLINE const char *fmq_take_varint32(const char *p, const char *end, int32_t *out)
{
    uint64_t raw;   /* always set by fmq_take_uvarint: no store of a zero on the hot path */
    p = fmq_take_uvarint(p, end, &raw, 5);
    *out = (int32_t)(((uint32_t)raw >> 1) ^ (0u - ((uint32_t)raw & 1)));
    return p;
}

FMQ_ALWAYS_INLINE const char *fmq_take_varint64(const char *p, const char *end, int64_t *out)
{
    uint64_t raw;
    p = fmq_take_uvarint(p, end, &raw, 10);
    *out = (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
    return p;
}

/* A zigzag length (-1 = null: data NULL) and that many bytes. */
FMQ_ALWAYS_INLINE const char *fmq_take_bytes(const char *p, const char *end, const char **data, ptrdiff_t *length)
{
    int32_t n;
    p = fmq_take_varint32(p, end, &n);
    if (p == NULL || n < -1 || n > end - p)
        return NULL;
    if (n == -1) {
        *data = NULL;
        *length = -1;
        return p;
    }
    *data = p;
    *length = n;
    return p + n;
}

/* Steps over `count` headers: a non-null key and a nullable value each. */
FMQ_COLD const char *fmq_skip_headers(const char *p, const char *end, int32_t count)
{
    const char *field;
    ptrdiff_t field_len;
    for (int32_t i = 0; i < count; i++) {
        p = fmq_take_bytes(p, end, &field, &field_len);
        if (p == NULL || field_len < 0)
            return NULL;
        p = fmq_take_bytes(p, end, &field, &field_len);
        if (p == NULL)
            return NULL;
    }
    return p;
}

/* Walks the header region of a record that fmq_parse_record located (and so validated): each step reads one
 * header into name/value, and cannot fail. */
typedef struct {
    const char *at;           /* the next header */
    const char *end;          /* the end of the region */
    const char *name;         /* never NULL in a validated region */
    ptrdiff_t name_len;
    const char *value;        /* NULL when the value is null */
    ptrdiff_t value_len;      /* -1 when the value is null */
} fmq_header_cursor;

FMQ_ALWAYS_INLINE void fmq_headers_begin(fmq_header_cursor *cursor, const fmq_record_view *record)
{
    /* The name and value fields set too: no compiler then takes them for unset after a step. */
    *cursor = (fmq_header_cursor){record->headers, record->headers + record->headers_len, NULL, 0, NULL, 0};
}

FMQ_ALWAYS_INLINE void fmq_next_header(fmq_header_cursor *cursor)
{
    cursor->at = fmq_take_bytes(cursor->at, cursor->end, &cursor->name, &cursor->name_len);
    cursor->at = fmq_take_bytes(cursor->at, cursor->end, &cursor->value, &cursor->value_len);
}

/* Locates the record at *pos (no further than end), checking every length against the record and the
 * batch, and advances *pos past it. Returns an FMQ_RECORD_* code. */
FMQ_ALWAYS_INLINE int fmq_parse_record(const char **pos, const char *end, fmq_record_view *out)
{
    int32_t length;
    const char *p = fmq_take_varint32(*pos, end, &length);
    if (p == NULL)
        return FMQ_RECORD_BAD_VARINT;
    if (length < 1 || length > end - p)
        return FMQ_RECORD_BAD_LENGTH;
    const char *record_end = p + length;
    *pos = record_end;
    out->size = length;
    out->attributes = (int8_t)p[0];
    p = fmq_take_varint64(p + 1, record_end, &out->timestamp_delta);
    if (p == NULL)
        return FMQ_RECORD_BAD_VARINT;
    p = fmq_take_varint32(p, record_end, &out->offset_delta);
    if (p == NULL)
        return FMQ_RECORD_BAD_VARINT;
    p = fmq_take_bytes(p, record_end, &out->key, &out->key_len);
    if (p == NULL)
        return FMQ_RECORD_BAD_KEY_LENGTH;
    p = fmq_take_bytes(p, record_end, &out->value, &out->value_len);
    if (p == NULL)
        return FMQ_RECORD_BAD_VALUE_LENGTH;
    p = fmq_take_varint32(p, record_end, &out->header_count);
    /* Every header takes at least two bytes: a forged count fails here, before anything is allocated. */
    if (p == NULL || out->header_count < 0 || out->header_count > (record_end - p) / 2)
        return FMQ_RECORD_BAD_HEADER_COUNT;
    out->headers = p;
    if (out->header_count) {
        p = fmq_skip_headers(p, record_end, out->header_count);
        if (p == NULL)
            return FMQ_RECORD_BAD_HEADERS;
    }
    out->headers_len = p - out->headers;
    return p == record_end ? FMQ_RECORD_OK : FMQ_RECORD_SIZE_MISMATCH;
}

#endif
