"""fastmq.nsq.compat: pynsq's Reader / Writer API, against the real nsqd of the session."""
from __future__ import annotations

import threading

from fastmq.nsq import compat
from tests.support.waiting import wait_for

WAIT = 20.0


def test_writer_and_reader_as_pynsq_users_write_them(nsq, topic):
    replies = []
    writer = compat.Writer([nsq.nsqd.tcp_address])
    writer.pub(topic, b"finish-me", callback=lambda conn, data: replies.append(data))
    writer.mpub(topic, [b"requeue-me", b"async"], callback=lambda conn, data: replies.append(data))
    writer.pub(topic, b"", callback=lambda conn, data: replies.append(data))       # nsqd refuses empty ones
    wait_for(lambda: len(replies) == 3, timeout=WAIT, message="the publish callbacks")
    refused = [reply for reply in replies if reply != b"OK"]
    assert len(refused) == 1 and isinstance(refused[0], compat.Error) and "E_BAD_MESSAGE" in str(refused[0])

    seen, later, given_up = [], [], []

    class Reader(compat.Reader):
        def giving_up(self, message):
            given_up.append(message.body)

    def handler(message):
        seen.append((message.body, message.attempts))
        if message.body == b"requeue-me":
            return False
        if message.body == b"async":
            message.enable_async()
            later.append(message)
            return None
        return True

    reader = Reader(topic=topic, channel="ch", message_handler=handler, nsqd_tcp_addresses=[nsq.nsqd.tcp_address],
                    max_in_flight=5, max_tries=2, requeue_delay=0, max_backoff_duration=0.05)
    try:
        wait_for(lambda: later, timeout=WAIT, message="the async message")
        threading.Thread(target=later[0].finish).start()      # answered later, from another thread
        wait_for(lambda: given_up and nsq.nsqd.topic_depth(topic, "ch") == (0, 0), timeout=WAIT,
                 message=lambda: f"all answered; seen {seen}")
    finally:
        reader.close()
        writer.close()
    assert (b"finish-me", 1) in seen and (b"async", 1) in seen
    # False requeues it; past max_tries it goes to giving_up() and is finished
    assert [attempts for body, attempts in seen if body == b"requeue-me"] == [1, 2]
    assert given_up == [b"requeue-me"]
    done = threading.Event()
    threading.Thread(target=lambda: (compat.run(), done.set()), daemon=True).start()
    assert done.wait(WAIT), "run() returns once every Reader and Writer is closed"
