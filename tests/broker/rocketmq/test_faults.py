"""Faults: the broker process is killed (kill -9) while fastmq.rocketmq's producer sends asynchronously, and
started again on its directory and ports. Every send the broker acknowledged is there afterwards, with its body at
the queue offset the answer named (what was in flight may fail: it was never acknowledged); sends made once the
broker is back go through, the client finding it again through the namesrv."""
from __future__ import annotations

import random
import socket
import threading
from concurrent.futures import Future
from pathlib import Path

from fastmq.broker.process import BrokerProcess
from fastmq.rocketmq import Message, Producer, SendStatus
from fastmq.store import decode_messages
from tests.support.waiting import wait_for

from .conftest import Remoting
from .test_endpoint import PULL, pull_fields

MESSAGES = 200


def port_below_ephemeral_range() -> int:
    """A free port the kernel never hands out as a connection's local port: while the broker is down, clients
    keep connecting to its ports, and one of their connections (or a TCP self-connect to a port of the ephemeral
    range) could take a port it must bind again."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def test_kill_9_during_async_sends_loses_nothing_acknowledged(tmp_path):
    broker_port, namesrv_port, kafka_port = (port_below_ephemeral_range() for _ in range(3))
    process = BrokerProcess(tmp_path / "data", port=kafka_port, args=["--rocketmq", f"127.0.0.1:{broker_port}",
                                                     "--namesrv", f"127.0.0.1:{namesrv_port}"]).start()
    try:
        with Producer("crash-producer", f"127.0.0.1:{namesrv_port}", send_timeout=10.0) as producer:
            producer.send(Message("crashed", b"create"))
            futures: list[tuple[bytes, Future]] = []
            back = threading.Event()
            failures: list[BaseException] = []

            def crash_midway() -> None:
                try:
                    wait_for(lambda: sum(f.done() for _, f in list(futures)) >= MESSAGES // 8,
                             message="no send was answered")
                    process.kill()
                    process.start()
                except BaseException as exc:      # reported by the test below
                    failures.append(exc)
                back.set()

            crasher = threading.Thread(target=crash_midway, name="crasher")
            crasher.start()
            for i in range(MESSAGES):
                if i == MESSAGES // 2:
                    wait_for(back.is_set, timeout=60, message="the broker did not come back")
                    assert not failures, f"the crash and restart failed: {failures[0]!r}"
                body = b"m-%d" % i
                futures.append((body, producer.send_async(Message("crashed", body))))
            crasher.join(60)
            acknowledged = []
            for body, future in futures:
                try:
                    result = future.result(30)
                except Exception:       # in flight when the broker died: never acknowledged
                    continue
                if result.status is SendStatus.SEND_OK:
                    acknowledged.append((body, result))
        assert {b"m-%d" % i for i in range(MESSAGES // 2, MESSAGES)} <= {body for body, _ in acknowledged}
        assert len(acknowledged) > MESSAGES // 2          # some were answered before the crash too
        client = Remoting(("127.0.0.1", broker_port))
        try:
            for body, result in acknowledged:
                answer = client.call(PULL, dict(pull_fields("crashed", result.queue_offset,
                                                            queue_id=result.message_queue.queue_id), maxMsgNums=1))
                assert [m.body for m in decode_messages(answer.body)] == [body]
        finally:
            client.close()
    finally:
        process.close()
