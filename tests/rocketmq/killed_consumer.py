"""The consumer that test_killed_consumer kills: `python -m tests.rocketmq.killed_consumer NAMESRV TOPIC GROUP LOG N`.
A fastmq.rocketmq PushConsumer whose listener appends "queueId offset" to LOG for each of the first N messages
it finishes; every later call blocks (a batch under way when the process dies), so the offsets it commits stop
at its oldest message in flight. It lives at most a minute, whatever happens."""
from __future__ import annotations

import sys
import threading

from fastmq.rocketmq import ConsumeStatus, PushConsumer

LIFETIME = 60.0


def main(namesrv: str, topic: str, group: str, log_path: str, finish: int) -> None:
    lock = threading.Lock()
    finished = 0
    never = threading.Event()
    with open(log_path, "a", buffering=1) as log:

        def listener(messages):
            nonlocal finished
            with lock:
                if finished >= finish:
                    blocked = True
                else:
                    blocked = False
                    finished += 1
                    log.write(f"{messages[0].queue_id} {messages[0].queue_offset}\n")
            if blocked:
                never.wait(LIFETIME)      # never answered: the kill comes first
                return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(group, namesrv, listener=listener, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(topic)
        consumer.start()
        log.write("STARTED\n")
        never.wait(LIFETIME)
        consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:5], int(sys.argv[5]))
