"""Pulling: long-polling PULL_MESSAGE requests per assigned queue, results handed to the consumer in queue order.

Each queue has a next offset and an epoch. A pull asks for up to pull_batch_size messages from the next offset with
PullSysFlag SUSPEND | SUBSCRIPTION: a broker with nothing new holds it up to suspend_ms and answers as soon as a
message arrives (no spinning). FOUND hands the decoded messages (filtered by tag, since the broker filters by tag
hash only) to `deliver` and moves the offset to nextBeginOffset; NOT_FOUND / RETRY_IMMEDIATELY pull again;
OFFSET_MOVED jumps to the broker's nextBeginOffset. Errors pull again after a second and ask for fresh routes.
Seeking or reassigning a queue starts a new epoch: answers to pulls of an older epoch are dropped.

Pipelining: a queue's offsets are consecutive message numbers, so while a pull from offset O is out, a queue with a
backlog (the broker's last maxOffset beyond O + pull_batch_size) also asks for the batch at O + pull_batch_size:
the broker's round trip then no longer bounds a queue to one batch at a time (against Apache RocketMQ the
consumer spent most of its time waiting for the answer with nothing to do). An answer is applied only when its
offset is the queue's next offset: one that comes early waits for its predecessor, and one that no longer fits
(the predecessor ended short of it: a tag filter skipped messages, a batch was cut by size) is dropped and its
range pulled again. Only subscriptions to every tag pipeline: a broker filtering by tag answers a range of its own
choosing.

Flow control: before each pull `may_pull(queue)` (the consumer's cached count and bytes) is asked; a queue it
refuses is paused until resume(). Every answer's round trip and message count go to the consumer's statistics.
Everything here runs on the client's loop thread; the public methods hand over.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from fastmq.io.errors import NetworkError
from fastmq.rocketmq._native.messages import MessageExt, decode_messages
from fastmq.rocketmq._native.remoting import RemotingCommand
from fastmq.rocketmq.client import ClientInstance
from fastmq.rocketmq.protocol import PullSysFlag, RequestCode, ResponseCode
from fastmq.rocketmq.route import MessageQueue
from fastmq.rocketmq.stats import ConsumeStats
from fastmq.rocketmq.subscription import Subscription

_log = logging.getLogger(__name__)

ERROR_BACKOFF = 1.0
Deliver = Callable[[MessageQueue, int, list[MessageExt], int], None]     # queue, epoch, messages, next offset


def pull_fields(group: str, queue: MessageQueue, offset: int, max_messages: int, expression: str,
                sub_version: int, suspend_ms: int) -> dict[Any, Any]:
    """PullMessageRequestHeader; suspend_ms > 0 asks the broker to hold the pull while it has nothing."""
    return {"consumerGroup": group, "topic": queue.topic, "queueId": queue.queue_id, "queueOffset": offset,
            "maxMsgNums": max_messages,
            "sysFlag": (PullSysFlag.SUSPEND if suspend_ms > 0 else 0) | PullSysFlag.SUBSCRIPTION,
            "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subscription": expression,
            "subVersion": sub_version, "expressionType": "TAG"}


PIPELINE_DEPTH = 2     # pulls of one queue in flight at once, when it has a backlog


class _QueueState:
    __slots__ = ("queue", "next_offset", "epoch", "in_flight", "early", "max_offset", "paused")

    def __init__(self, queue: MessageQueue, next_offset: int, epoch: int) -> None:
        self.queue = queue
        self.next_offset = next_offset
        self.epoch = epoch
        self.in_flight: set[int] = set()     # the offsets of the pulls out
        self.early: dict[int, RemotingCommand] = {}     # answers waiting for their predecessor, by offset
        self.max_offset = -1                 # the broker's maxOffset in its last answer
        self.paused = False


class Fetcher:
    def __init__(self, instance: ClientInstance, group: str, subscriptions: dict[str, Subscription],
                 deliver: Deliver, may_pull: Callable[[MessageQueue], bool], stats: ConsumeStats, *,
                 pull_batch_size: int = 32,
                 suspend_ms: int = 15000, check_crc: bool = True) -> None:
        self.instance = instance
        self.loop = instance.remoting.loop
        self.group = group
        self.subscriptions = subscriptions
        self.deliver = deliver
        self.may_pull = may_pull
        self.stats = stats
        self.pull_batch_size = pull_batch_size
        self.suspend_ms = suspend_ms
        self.check_crc = check_crc
        self.states: dict[MessageQueue, _QueueState] = {}
        self._closed = False

    # ---- any thread ----------------------------------------------------------------------------------------

    def assign(self, queue: MessageQueue, offset: int, epoch: int) -> None:
        """Start (or restart, at `offset`) pulling a queue; `epoch` tags what this fetch delivers."""
        self.loop.call_soon_threadsafe(self._assign, queue, offset, epoch)

    def revoke(self, queue: MessageQueue) -> None:
        self.loop.call_soon_threadsafe(self.states.pop, queue, None)

    def resume(self, queue: MessageQueue) -> None:
        self.loop.call_soon_threadsafe(self._resume, queue)

    def close(self) -> None:
        self._closed = True

    # ---- loop thread ---------------------------------------------------------------------------------------

    def _assign(self, queue: MessageQueue, offset: int, epoch: int) -> None:
        state = _QueueState(queue, offset, epoch)
        self.states[queue] = state
        self._pull(state)

    def _resume(self, queue: MessageQueue) -> None:
        state = self.states.get(queue)
        if state is not None and state.paused:
            state.paused = False
            self._pull(state)

    def _pull(self, state: _QueueState) -> None:
        if self._closed or self.states.get(state.queue) is not state:
            return
        queue = state.queue
        subscription = self.subscriptions.get(queue.topic)
        offset = state.next_offset
        if offset in state.in_flight or offset in state.early:
            # The next batch is out already: pipeline the one after it if the queue has a backlog.
            if subscription is not None and not subscription.all:
                return
            offset += self.pull_batch_size
            if (len(state.in_flight) >= PIPELINE_DEPTH or offset >= state.max_offset or offset in state.in_flight
                    or offset in state.early):
                return
        if not self.may_pull(queue):
            state.paused = True
            return
        expression = subscription.expression if subscription else "*"
        route = self.instance.routes.get(queue.topic)
        address = route.master(queue.broker_name) if route else None
        if address is None:
            if not state.in_flight:
                self.instance.request_refresh(f"no master known for {queue}")
                self.loop.call_later(ERROR_BACKOFF, self._pull, state)
            return
        fields = pull_fields(self.group, queue, offset, self.pull_batch_size, expression,
                             subscription.version if subscription else 0, self.suspend_ms)
        frame, opaque = self.instance.remoting.encode(RequestCode.PULL_MESSAGE, fields)
        state.in_flight.add(offset)
        epoch = state.epoch
        sent = self.loop.time()
        self.instance.remoting.invoke_frame(
            address, frame, opaque,
            lambda response, error: self._answered(state, epoch, offset, sent, response, error),
            timeout=self.suspend_ms / 1000.0 + self.instance.request_timeout + 2.0)
        if offset == state.next_offset:
            self._pull(state)           # and the batch after it, when there is a backlog

    def _answered(self, state: _QueueState, epoch: int, offset: int, sent: float, response: RemotingCommand | None,
                  error: BaseException | None) -> None:
        state.in_flight.discard(offset)
        rt_ms = (self.loop.time() - sent) * 1000.0
        if self._closed or state.epoch != epoch or self.states.get(state.queue) is not state:
            return
        if error is None:
            assert response is not None         # a callback has the response or the error
            if offset != state.next_offset:
                if offset > state.next_offset:
                    state.early[offset] = response      # applied after its predecessor
                return
            try:
                self.stats.pulled(state.queue.topic, self._apply(state, response), rt_ms)
                return
            except Exception as exc:   # a malformed answer: like a failed pull, try again later
                error = exc
        if not isinstance(error, NetworkError):
            _log.warning("pulling %s failed: %s", state.queue, error)
        state.early.clear()
        self.instance.request_refresh(f"a pull failed: {error}")
        self.loop.call_later(ERROR_BACKOFF, self._pull, state)

    def _apply(self, state: _QueueState, response: RemotingCommand) -> int:
        """Hand what a pull answered (and answers that waited for it) to the consumer and pull again; returns how
        many messages they brought."""
        count = self._apply_one(state, response)
        early = state.early
        while early:
            waiting = early.pop(state.next_offset, None)
            if waiting is None:
                for offset in [offset for offset in early if offset < state.next_offset]:
                    del early[offset]           # its predecessor ended short of it (or past it)
                break
            count += self._apply_one(state, waiting)
        self._pull(state)
        return count

    def _apply_one(self, state: _QueueState, response: RemotingCommand) -> int:
        code = response.code
        messages: list[MessageExt] = []
        fields = response.ext_fields
        max_offset = fields.get("maxOffset")
        if max_offset is not None:
            state.max_offset = int(max_offset)
        if code == ResponseCode.SUCCESS:
            next_offset = int(fields["nextBeginOffset"])
            messages = decode_messages(response.body or b"", self.check_crc)
            subscription = self.subscriptions.get(state.queue.topic)
            if subscription is not None and not subscription.all:
                messages = [m for m in messages if m.tags in subscription.tags]
            state.next_offset = next_offset
            self.deliver(state.queue, state.epoch, messages, next_offset)
        elif code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                      ResponseCode.PULL_OFFSET_MOVED):
            # Nothing (or nothing matching the tags) up to nextBeginOffset: the position moves past it too.
            next_offset = int(fields.get("nextBeginOffset", state.next_offset))
            if code == ResponseCode.PULL_OFFSET_MOVED:
                _log.warning("offset %d of %s is out of range; moving to %d", state.next_offset, state.queue,
                             next_offset)
            if next_offset != state.next_offset:
                state.next_offset = next_offset
                self.deliver(state.queue, state.epoch, [], next_offset)
        else:
            raise RuntimeError(f"pull answered code {code}: {response.remark}")
        return len(messages)
