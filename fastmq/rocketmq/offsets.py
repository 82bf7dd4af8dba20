"""Where consumers keep their offsets: on the broker (clustering) or in a local file (broadcasting).

RemoteOffsetStore: QUERY_CONSUMER_OFFSET 14 reads a group's offset of one queue (QUERY_NOT_FOUND 22: none yet),
UPDATE_CONSUMER_OFFSET 15 writes it, to the queue's master broker. Apache RocketMQ's broker makes a group's offset
table of a topic on its first commit with a get-then-put that is not atomic: two first commits of one topic handled
at once each make a table, the later put replaces the earlier table, and the earlier offset is lost while both are
answered SUCCESS. So the first commit of a topic to a broker goes alone and the others wait for its answer; the
consumers send every position again each auto-commit, which mends what another member's first commit lost.
LocalOffsetStore: {"offsetTable": {"topic@broker@queueId": offset}} in <directory>/<client id>/<group>/offsets.json
(Java's LocalFileOffsetStore layout), written to a temporary file and renamed so a crash leaves the old one.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from fastmq.rocketmq.client import ClientInstance, check_success
from fastmq.rocketmq.errors import RocketMQError
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from fastmq.rocketmq.route import MessageQueue


class RemoteOffsetStore:
    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self._tables: set[tuple[str, str]] = set()      # (broker address, topic) with the group's table made
        self._first_commits = threading.Lock()          # the auto-commit and the user's commit() may both be first

    def read(self, queue: MessageQueue) -> int | None:
        address = self.instance.master_address(queue.broker_name, queue.topic)
        # setZeroIfNotFound=false: a 5.x broker otherwise answers 0 for a queue whose first message is still
        # there, and consume_from_where would never apply.
        response = self.instance.remoting.call(address, RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": self.group, "topic": queue.topic, "queueId": queue.queue_id,
            "setZeroIfNotFound": "false"})
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        check_success(response, f"reading the offset of {queue}")
        return int(response.ext_fields["offset"])

    def commit(self, offsets: dict[MessageQueue, int]) -> None:
        futures: list[Future[Any]] = []
        for queue, offset in offsets.items():
            address = self.instance.master_address(queue.broker_name)
            fields = {"consumerGroup": self.group, "topic": queue.topic, "queueId": queue.queue_id,
                      "commitOffset": offset}
            table = (address, queue.topic)
            if table not in self._tables:
                with self._first_commits:
                    if table not in self._tables:
                        check_success(self.instance.remoting.call(
                            address, RequestCode.UPDATE_CONSUMER_OFFSET, fields), "committing an offset")
                        self._tables.add(table)
                        continue
            futures.append(self.instance.remoting.invoke(address, RequestCode.UPDATE_CONSUMER_OFFSET, fields))
        errors = []
        for future in futures:
            try:
                check_success(future.result(self.instance.request_timeout + 1.0), "committing an offset")
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise RocketMQError(f"{len(errors)} of {len(futures)} offset commits failed: {errors[0]}") from errors[0]


def queue_key(queue: MessageQueue) -> str:
    return f"{queue.topic}@{queue.broker_name}@{queue.queue_id}"


class LocalOffsetStore:
    def __init__(self, directory: str | os.PathLike[str], client_id: str, group: str) -> None:
        self.path = Path(directory) / client_id.replace(":", "_") / group / "offsets.json"
        self._table: dict[str, int] = {}
        if self.path.exists():
            try:
                self._table = {k: int(v) for k, v in json.loads(self.path.read_text())["offsetTable"].items()}
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise RocketMQError(f"the offset file {self.path} is damaged: {exc}") from None

    def read(self, queue: MessageQueue) -> int | None:
        return self._table.get(queue_key(queue))

    def commit(self, offsets: dict[MessageQueue, int]) -> None:
        for queue, offset in offsets.items():
            self._table[queue_key(queue)] = offset
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".offsets-")
        with os.fdopen(fd, "w") as out:
            json.dump({"offsetTable": self._table}, out)
        os.replace(temporary, self.path)
