"""Calls made from any thread and answered on the loop thread: each waits until a node can take it (its own, or
any node the protocol picks), is sent, and its Future ends with the answer, the error, or the timeout of the call
when no node could take it in time. The protocol supplies the hooks: which node, whether it is known and ready,
how to send (and to end the Future), and the exceptions its users expect."""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from concurrent.futures import Future
from typing import Any, Callable


@dataclasses.dataclass
class PendingCall:
    node_id: Hashable | None        # None: any node
    request: Any
    future: Future[Any]             # the answer: whatever the protocol decodes
    deadline: float                 # time.monotonic() by which it must be sent (and, then, answered)
    # End the call when its node's connection fails instead of waiting for the node to come back: for callers
    # that look for another node then (a coordinator that died has a successor elsewhere).
    give_up_when_failing: bool = False


@dataclasses.dataclass(frozen=True)
class CallHooks:
    """What the protocol's client answers for the queue, each on the loop thread: pick_node() a node for a call
    that names none (None: none can take one now); known(node); ready(node) (connected and able to send now;
    may start connecting); failing(node) (its last connection failed and no new one is coming); send(node, call,
    now) sends and ends call.future when the answer comes; unknown_node(node), timed_out(call, node) and
    unreachable(call, node) the exceptions to end a call with."""

    pick_node: Callable[[], Hashable | None]
    known: Callable[[Hashable], bool]
    ready: Callable[[Hashable], bool]
    failing: Callable[[Hashable], bool]
    send: Callable[[Hashable, PendingCall, float], None]
    unknown_node: Callable[[Hashable], BaseException]
    timed_out: Callable[[PendingCall, Hashable | None], BaseException]
    unreachable: Callable[[PendingCall, Hashable], BaseException]


class CallQueue:
    """The calls waiting for a node, loop thread only: dispatch() whenever a node may have become ready (a
    connection came up, an answer freed a slot) and periodically, so that deadlines end the calls that waited
    too long."""

    def __init__(self, hooks: CallHooks) -> None:
        self.hooks = hooks
        self._waiting: list[PendingCall] = []

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, call: PendingCall, now: float) -> None:
        self._waiting.append(call)
        self.dispatch(now)

    def dispatch(self, now: float) -> None:
        """Send what a ready node can take, end what is past its deadline or names an unknown node."""
        if not self._waiting:
            return
        hooks = self.hooks
        still_waiting = []
        for call in self._waiting:
            if call.future.done():
                continue
            node_id = call.node_id if call.node_id is not None else hooks.pick_node()
            if node_id is not None and not hooks.known(node_id):
                call.future.set_exception(hooks.unknown_node(node_id))
            elif node_id is not None and hooks.ready(node_id):
                hooks.send(node_id, call, now)
            elif call.give_up_when_failing and node_id is not None and hooks.failing(node_id):
                call.future.set_exception(hooks.unreachable(call, node_id))
            elif now >= call.deadline:
                call.future.set_exception(hooks.timed_out(call, node_id))
            else:
                still_waiting.append(call)
        self._waiting = still_waiting

    def fail_all(self, error: Callable[[], BaseException]) -> None:
        """End every waiting call with a fresh error (the client is closing)."""
        waiting, self._waiting = self._waiting, []
        for call in waiting:
            if not call.future.done():
                call.future.set_exception(error())
