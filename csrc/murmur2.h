#ifndef FASTMQ_MURMUR2_H
#define FASTMQ_MURMUR2_H
#include <stddef.h>
#include <stdint.h>

/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2): seed 0x9747b28c, little-endian 4-byte
 * words, the Java client's tail handling. The default partitioner uses (h & 0x7fffffff) % partitions. */
int32_t fmq_kafka_murmur2(const void *key, size_t len);

#endif
