"""Faults: the broker process is killed (kill -9) while fastmq.rocketmq's producers send, one asynchronously and
one synchronously from another thread (its sends are round trips on its own thread: Connection.call_blocking), and
started again on its directory and ports. Every send the broker acknowledged is there afterwards, with its body at
the queue offset the answer named (what was in flight may fail: it was never acknowledged); sends made once the
broker is back go through, the client finding it again through the namesrv."""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from fastmq.broker.process import BrokerProcess
from fastmq.rocketmq import Message, Producer, SendFailedError, SendResult, SendStatus
from fastmq.store import decode_messages
from tests.support.servers import port_below_ephemeral_range
from tests.support.waiting import wait_for

from .conftest import Remoting
from .test_endpoint import PULL, pull_fields

MESSAGES = 200
SYNC_AFTER_RESTART = 20     # the sync sender stops once this many of its sends went to the restarted broker
SYNC_LIMIT, SYNC_SECONDS = 50_000, 60.0     # and sends no more than this many, for no longer than this


def test_kill_9_during_async_sends_loses_nothing_acknowledged(tmp_path):
    broker_port, namesrv_port, kafka_port = (port_below_ephemeral_range() for _ in range(3))
    process = BrokerProcess(tmp_path / "data", port=kafka_port, args=["--rocketmq", f"127.0.0.1:{broker_port}",
                                                     "--namesrv", f"127.0.0.1:{namesrv_port}"]).start()
    try:
        with Producer("crash-producer", f"127.0.0.1:{namesrv_port}", send_timeout=10.0) as producer, \
                Producer("crash-sync-producer", f"127.0.0.1:{namesrv_port}", send_timeout=10.0) as sync_producer:
            producer.send(Message("crashed", b"create"))
            sync_producer.send(Message("crashed", b"create-sync"))
            futures: list[tuple[bytes, Future]] = []
            back = threading.Event()
            failures: list[BaseException] = []
            # (body, result, whether the broker had come back before the send started)
            synced: list[tuple[bytes, SendResult, bool]] = []

            def send_sync() -> None:
                after, until = 0, time.monotonic() + SYNC_SECONDS
                for i in range(SYNC_LIMIT):
                    if after >= SYNC_AFTER_RESTART or time.monotonic() > until:
                        return
                    body, after_restart = b"s-%d" % i, back.is_set()
                    try:
                        synced.append((body, sync_producer.send(Message("crashed", body)), after_restart))
                        after += after_restart
                    except SendFailedError:     # the broker was down for all of its attempts: not acknowledged
                        time.sleep(0.01)

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
            syncer = threading.Thread(target=send_sync, name="sync-sender")
            syncer.start()
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
            syncer.join(SYNC_SECONDS + 30)
        assert not syncer.is_alive()
        assert {b"m-%d" % i for i in range(MESSAGES // 2, MESSAGES)} <= {body for body, _ in acknowledged}
        assert len(acknowledged) > MESSAGES // 2          # some were answered before the crash too
        # sync sends were acknowledged once the broker was back, and each is stored once, where its answer said
        assert any(after_restart for _, _, after_restart in synced)
        acknowledged += [(body, result) for body, result, _ in synced if result.status is SendStatus.SEND_OK]
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
