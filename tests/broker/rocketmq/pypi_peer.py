"""Drives PyPI `rocketmq` (a ctypes wrapper of the C++ client) against a namesrv, run by test_pypi_client.py in
a child process (its C++ threads and its logs under $HOME/logs stay out of the test process; the test gives it
a temporary HOME). Usage: python pypi_peer.py NAMESRV TOPIC GROUP; prints one JSON object."""
from __future__ import annotations

import json
import sys
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer

DEADLINE_S = 30.0


def main(namesrv: str, topic: str, group: str) -> dict:
    producer = Producer(f"{group}-producer")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    sent = []
    try:
        for i in range(5):
            message = Message(topic)
            message.set_keys(f"key-{i}")
            message.set_tags("TagA")
            message.set_property("color", "red")
            message.set_body(f"body-{i}")
            result = producer.send_sync(message)
            sent.append({"status": int(result.status), "msg_id": result.msg_id, "offset": result.offset})
    finally:
        producer.shutdown()
    pull = PullConsumer(f"{group}-pull")
    pull.set_namesrv_addr(namesrv)
    pull.start()
    pulled = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        for message in pull.pull(topic):
            pulled.append({"body": message.body.decode(), "tags": message.tags.decode(),
                           "keys": message.keys.decode(), "color": message.get_property("color").decode()})
            if len(pulled) >= len(sent) or time.monotonic() > deadline:
                break
    finally:
        pull.shutdown()
    pushed: list[str] = []
    push = PushConsumer(f"{group}-push")
    push.set_namesrv_addr(namesrv)
    push.subscribe(topic, lambda message: pushed.append(message.body.decode()), "TagA")
    push.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(pushed) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        push.shutdown()
    return {"sent": sent, "pulled": pulled, "pushed": sorted(pushed)}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])), flush=True)
