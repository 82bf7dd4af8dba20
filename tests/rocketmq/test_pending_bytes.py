"""max_pending_bytes: the bytes of a producer's unfinished sends are bounded (fastmq/rocketmq/_native/pending.pyx)."""
from __future__ import annotations

import queue
import random
import socket
import threading
import time

import pytest

from fastmq.rocketmq import Message, MessageQueue, Producer, SendBufferFullError
from fastmq.rocketmq._native.pending import PendingBytes
from fastmq.rocketmq.route import TopicRoute
from tests.support.rocketmq import unique
from tests.support.waiting import wait_for


def test_a_reservation_waits_for_room_and_gives_up_at_its_deadline():
    pending = PendingBytes(100)
    pending.reserve(60, time.monotonic() + 1)
    with pytest.raises(SendBufferFullError, match="max_pending_bytes 100"):
        pending.reserve(50, time.monotonic() + 0.05)
    assert pending.used == 60
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(pending.reserve(50, time.monotonic() + 10)))
    waiter.start()
    time.sleep(0.05)
    assert not got                     # still waiting for room
    pending.release(60)
    waiter.join(10)
    assert got == [None] and pending.used == 50
    pending.release(50)
    pending.reserve(500, time.monotonic())   # larger than the limit: goes alone when nothing is pending
    assert pending.used == 500
    with pytest.raises(ValueError):
        PendingBytes(0)


def test_reservations_from_many_threads_stay_within_the_limit():
    """Four callers reserve (most fit at once, without the lock; some wait) while one thread, as the I/O thread
    does, releases what they reserved: the bound holds at every reservation and everything comes back."""
    limit, per_caller = 1000, 3000
    pending = PendingBytes(limit)
    reserved: queue.SimpleQueue = queue.SimpleQueue()
    over: list = []

    def caller(seed: int) -> None:
        sizes = random.Random(seed)
        for _ in range(per_caller):
            size = sizes.randint(1, 200)
            pending.reserve(size, time.monotonic() + 30)
            if pending.used > limit:
                over.append(pending.used)
            reserved.put(size)

    def releaser() -> None:
        for _ in range(4 * per_caller):
            pending.release(reserved.get(timeout=30))

    threads = [threading.Thread(target=caller, args=(seed,)) for seed in range(4)] + [threading.Thread(target=releaser)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert not over and pending.used == 0 and pending.waiting == 0
    assert pending.reserved == pending.released > 4 * per_caller


class SilentBroker:
    """A broker address that accepts connections and reads nothing until drain(): the client's output piles up."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.received = 0
        self._reading = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def drain(self) -> None:
        self._reading.set()

    def _serve(self) -> None:
        self.sock.settimeout(10)
        try:
            conn = self.sock.accept()[0]
        except OSError:
            return
        with conn:
            conn.settimeout(0.05)
            while not self._stop.is_set():
                if not self._reading.wait(0.05):
                    continue
                try:
                    chunk = conn.recv(1 << 20)
                except (TimeoutError, socket.timeout):
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                self.received += len(chunk)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self.sock.close()


@pytest.fixture
def silent_broker():
    broker = SilentBroker()
    yield broker
    broker.close()


def test_oneway_sends_the_socket_does_not_take_wait_for_room(rocketmq_server, silent_broker):
    topic = unique("pending")
    queue = MessageQueue(topic, "silent-broker", 0)
    body = random.Random(7).randbytes(256 * 1024)     # incompressible: sent as it is
    limit = 1024 * 1024
    with Producer(unique("pending"), rocketmq_server.namesrv_addr, send_timeout=10.0,
                  max_pending_bytes=limit) as producer:
        producer.instance.routes[topic] = TopicRoute(topic, {"silent-broker": {0: silent_broker.address}}, [queue])
        pending = producer.remoting.pending
        loop = producer.remoting.loop
        sent = 0
        # The kernel's buffers take a few MiB; then the unwritten requests fill the bound.
        while pending.used + len(body) <= limit and sent < 200:
            producer.send_oneway(Message(topic, body), queue=queue)
            sent += 1
            for _ in range(2):      # two turns of the loop: the send is handed over and written if it can be
                loop.run_in_loop(lambda: None, timeout=10)
        assert sent < 200 and pending.used <= limit
        blocked = threading.Thread(target=producer.send_oneway, args=(Message(topic, body),), kwargs={"queue": queue})
        blocked.start()
        wait_for(lambda: pending.waiting == 1, timeout=10, message="the send never waited for room")
        assert blocked.is_alive() and pending.used <= limit
        silent_broker.drain()               # the socket takes the rest: written sends release their bytes
        blocked.join(10)
        assert not blocked.is_alive()
        wait_for(lambda: pending.used == 0, timeout=10, message=lambda: f"{pending.used} bytes still pending")
        wait_for(lambda: silent_broker.received >= (sent + 1) * len(body), timeout=10)
        del producer.instance.routes[topic]     # no unregistration at close for a broker that never answers
