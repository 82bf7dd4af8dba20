"""The Apache Kafka node the benches measure against: the test kit's node (tests/support/apache_kafka.py, with its
64 KiB index files) with both of HotSpot's compilers, as Apache's bin/kafka-server-start.sh runs it (SERVER_JIT: the
kit's JVMs stop at the client compiler, which starts a test's broker sooner).

Why the index files are small, measured here: Apache Kafka makes each active segment's offset and time index a sparse
file of log.index.size.max.bytes (10 MiB by default) and maps it into memory. The first write to a page of it is a page
fault that reads around the faulting page, and this machine's disk reads ahead 8 MiB
(/sys/block/vda/queue/read_ahead_kb = 8192): one fault zero-fills 8 MiB of page cache (4.5 ms of system CPU, measured on
a mapped sparse file), so every partition ties up 16 MiB of page cache. 4000 partitions want 64 GiB on a 24 GiB
machine: the kernel evicts index pages as others fault in, and the broker faults them in again while the clients run.
Perf of the broker during 200k records to 1000 topics x 4 partitions: 70% of its CPU in filemap_fault /
page_cache_ra_order, and its CPU per record followed the page cache's state (24.6-37 us), not the requests.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.apache_kafka import KafkaCluster
from tests.support.servers import SERVER_JIT


def bench_cluster(directory: Path, size: int = 1, **options) -> KafkaCluster:
    """A KafkaCluster (not started) whose JVMs run both compilers; options go to KafkaCluster."""
    return KafkaCluster(directory, size, jvm_options=SERVER_JIT, **options)
