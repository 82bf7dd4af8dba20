"""A Kafka producer's floor: the requests a producer sends, written by a client of almost no CPU. Its rate over a
peer's shows what the broker gives such a client on this machine (benches/bench_producer.py's 1 KiB row,
benches/bench_aio.py's create_batch/send_batch row)."""
from __future__ import annotations

import socket
import struct
import threading
import time

from tests.support.sockets import recv_exact

FLOOR_IN_FLIGHT = 5                 # unanswered requests at most, as every client here has


def produce_floor(servers, topic, value, count, codec):
    """`count` records of `value` without a client: the requests a producer sends (one batch of about 256 KiB a
    request to partition 0, acks=1, at most FLOOR_IN_FLIGHT unanswered), encoded once (a full request and the
    remainder's) and written again and again with a new correlation id on a blocking socket while a second thread
    reads the answers: a client of almost no CPU. The broker appends every copy as new records."""
    from fastmq.kafka import protocol as kp
    from fastmq.kafka.record.default_records import DefaultRecordBatchBuilder

    assert codec is None, "the floor sends uncompressed batches"
    per_request = (262144 - 61) // (len(value) + 12)       # the batch header, and a record's own fields

    def request(records: int) -> bytearray:
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
        now_ms = int(time.time() * 1000)
        for i in range(records):
            builder.append(i, now_ms, None, value, [])
        body = kp.ProduceRequest(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
            kp.ProduceRequest.TopicProduceData(name=topic, partition_data=[
                kp.ProduceRequest.PartitionProduceData(index=0, records=bytes(builder.build()))])])
        return bytearray(memoryview(kp.encode_request(0, 9, 0, "fastmq-bench-floor", body)))

    sizes = [per_request] * (count // per_request) + ([count % per_request] if count % per_request else [])
    frames = {size: request(size) for size in set(sizes)}
    host, port = servers.split(",")[0].rsplit(":", 1)
    in_flight = threading.Semaphore(FLOOR_IN_FLIGHT)
    failures: list[str] = []

    def read_answers(sock: socket.socket) -> None:
        for _ in sizes:
            frame = recv_exact(sock, struct.unpack(">i", recv_exact(sock, 4))[0])
            _, answer = kp.decode_response(0, 9, frame)
            codes = {p.error_code for t in answer.responses for p in t.partition_responses}
            if codes != {0}:
                failures.append(f"error codes {codes}")
            in_flight.release()

    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = threading.Thread(target=read_answers, args=(sock,), name="floor-answers")
        reader.start()
        for correlation_id, size in enumerate(sizes, 1):
            in_flight.acquire()
            frame = frames[size]
            struct.pack_into(">i", frame, 8, correlation_id)      # after the size, api key and version
            sock.sendall(frame)
        reader.join(300)
    assert not reader.is_alive() and not failures, failures or "the broker did not answer every request"
