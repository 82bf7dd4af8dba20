"""Pulling: one long-polling PULL_MESSAGE in flight per assigned queue, results handed to the consumer.

Each queue has a next offset and an epoch. A pull asks for up to pull_batch_size messages from the next offset with
PullSysFlag SUSPEND | SUBSCRIPTION: a broker with nothing new holds it up to suspend_ms and answers as soon as a
message arrives (no spinning). FOUND hands the decoded messages (filtered by tag, since the broker filters by tag
hash only) to `deliver` and moves the offset to nextBeginOffset; NOT_FOUND / RETRY_IMMEDIATELY pull again;
OFFSET_MOVED jumps to the broker's nextBeginOffset. Errors pull again after a second and ask for fresh routes.
Seeking or reassigning a queue starts a new epoch: answers to pulls of an older epoch are dropped.

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


class _QueueState:
    __slots__ = ("queue", "next_offset", "epoch", "in_flight", "paused")

    def __init__(self, queue: MessageQueue, next_offset: int, epoch: int) -> None:
        self.queue = queue
        self.next_offset = next_offset
        self.epoch = epoch
        self.in_flight = False
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
        if self._closed or state.in_flight or self.states.get(state.queue) is not state:
            return
        if not self.may_pull(state.queue):
            state.paused = True
            return
        queue = state.queue
        subscription = self.subscriptions.get(queue.topic)
        expression = subscription.expression if subscription else "*"
        route = self.instance.routes.get(queue.topic)
        address = route.master(queue.broker_name) if route else None
        if address is None:
            self.instance.request_refresh(f"no master known for {queue}")
            self.loop.call_later(ERROR_BACKOFF, self._pull, state)
            return
        fields = pull_fields(self.group, queue, state.next_offset, self.pull_batch_size, expression,
                             subscription.version if subscription else 0, self.suspend_ms)
        frame, opaque = self.instance.remoting.encode(RequestCode.PULL_MESSAGE, fields)
        state.in_flight = True
        epoch = state.epoch
        sent = self.loop.time()
        self.instance.remoting.invoke_frame(
            address, frame, opaque, lambda response, error: self._answered(state, epoch, sent, response, error),
            timeout=self.suspend_ms / 1000.0 + self.instance.request_timeout + 2.0)

    def _answered(self, state: _QueueState, epoch: int, sent: float, response: RemotingCommand | None,
                  error: BaseException | None) -> None:
        state.in_flight = False
        rt_ms = (self.loop.time() - sent) * 1000.0
        if self._closed or state.epoch != epoch or self.states.get(state.queue) is not state:
            return
        if error is None:
            assert response is not None         # a callback has the response or the error
            try:
                self.stats.pulled(state.queue.topic, self._apply(state, response), rt_ms)
                return
            except Exception as exc:   # a malformed answer: like a failed pull, try again later
                error = exc
        if not isinstance(error, NetworkError):
            _log.warning("pulling %s failed: %s", state.queue, error)
        self.instance.request_refresh(f"a pull failed: {error}")
        self.loop.call_later(ERROR_BACKOFF, self._pull, state)

    def _apply(self, state: _QueueState, response: RemotingCommand) -> int:
        """Hand what a pull answered to the consumer and pull again; returns how many messages it brought."""
        code = response.code
        messages: list[MessageExt] = []
        fields = response.ext_fields
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
        self._pull(state)
        return len(messages)
