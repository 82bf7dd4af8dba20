"""The Apache Kafka node the benches measure against: the test kit's node (tests/support/apache_kafka.py, with its
64 KiB index files) with both of HotSpot's compilers, as Apache's bin/kafka-server-start.sh runs it (SERVER_JIT: the
kit's JVMs stop at the client compiler, which starts a test's broker sooner), the kernel's own socket buffer
sizes (SOCKET_BUFFERS), the same for every client, and a deleted topic's files removed at once (PROMPT_DELETION:
Apache keeps them 60 s; a bench that deletes each run's topic then gives the next run the page cache it freed, see
benches/bench_producer.py).

Why the socket buffers, measured here (1 KiB produce, bench_producer, loaded machine): Apache serves one request
per connection at a time (it mutes the connection until the response is sent), so one connection's rate is one
256 KiB request over the broker's serial work on it: its network thread reads it, a request handler appends it,
the network thread answers. Kafka's default socket.receive.buffer.bytes, 102400, fixes SO_RCVBUF below the size of
one request, so the network thread takes each request in pieces, going back to its selector between them. With -1
(its documentation: "the OS default will be used", i.e. autotuning) the network thread's CPU per record, read
per thread from /proc, fell from 700-900 to 440-520 ns for fastmq's requests and from 740-840 to 520-600 ns for
confluent-kafka's (six runs each), out of 1,450-1,900 ns of broker CPU a record; the request handlers' share stayed
at 620-840 ns. Running the node as Apache ships it (G1 with a 1 GiB heap, 3 network and 8 I/O threads) changed
nothing measurable: one connection uses one network thread and one handler at a time, and either collector
paused it for 0.8-1.6% of the run.

One request's turn, from Apache's request log (kafka.request.logger at DEBUG) in those runs, ms per 256 KiB request,
fastmq's / confluent-kafka's, default buffers: from the last response sent to the whole next request read (the read
and any wait for the client) 0.17-0.22 / 0.20-0.47, queued for a handler 0.05-0.08 / 0.07-0.09, the append 0.17-0.20
/ 0.18-0.19, queued for the network thread 0.04-0.06 / 0.05-0.10, sending the response 0.03-0.09 / 0.03-0.08. With
-1 the first part fell to 0.10-0.15 for fastmq's requests and to 0.16-0.27 for confluent-kafka's, whose next request
was more often not yet written. The append follows the page cache: in the first run after a pause it took 0.75 ms,
the handlers spending 2.5 us of system time a record copying into new page-cache pages, which this VM's host backs
only when first touched (dd of 1 GiB into a new file: 2.3 s of system time, 86% in that copy; 0.2 s once, reusing
freed pages).

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
from tests.support.waiting import wait_for

# Kafka's documented "-1: the OS default" for the broker's SO_SNDBUF and SO_RCVBUF (see the module docstring).
SOCKET_BUFFERS = {"socket.send.buffer.bytes": -1, "socket.receive.buffer.bytes": -1}
# A deleted topic's files go at once (Apache waits 60 s): a bench that deletes each run's topic hands its page cache
# to the next run (see the module docstring).
PROMPT_DELETION = {"log.segment.delete.delay.ms": 0}


def bench_cluster(directory: Path, size: int = 1, **options) -> KafkaCluster:
    """A KafkaCluster (not started) whose JVMs run both compilers, with the kernel's socket buffer sizes and prompt
    deletion of deleted topics' files; options go to KafkaCluster (properties given there override those)."""
    properties = {**SOCKET_BUFFERS, **PROMPT_DELETION, **options.pop("properties", {})}
    return KafkaCluster(directory, size, jvm_options=SERVER_JIT, properties=properties, **options)


def drop_topic(broker, topic: str) -> None:
    """Deletes a measured run's topic and waits until the broker's files of it are gone, which frees their page
    cache for the next run (see the module docstring; a broker without data_dirs, Tansu or the embedded broker, is
    not waited for)."""
    from fastmq.kafka import Admin

    with Admin(broker.bootstrap_servers) as admin:
        admin.delete_topics([topic], timeout=120)
    directories = broker.data_dirs(broker.nodes[0]) if hasattr(broker, "data_dirs") else []    # Tansu: in memory
    wait_for(lambda: not any(path.name.startswith(f"{topic}-") for directory in directories
                             for path in directory.iterdir()), 120, 0.1,
             lambda: f"the broker still has files of the deleted topic {topic}")
