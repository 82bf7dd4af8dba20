"""fastmq.client.calls: calls waiting for a node, sent when one is ready, ended by their deadline, an unknown
node, a failed connection (when asked to) or the client closing."""
from __future__ import annotations

from concurrent.futures import Future

import pytest

from fastmq.client import CallHooks, CallQueue, PendingCall


class Unknown(Exception):
    pass


class TimedOut(Exception):
    pass


class Unreachable(Exception):
    pass


class Nodes:
    """The protocol's side, as plain state: which nodes exist and are ready; what was sent where."""

    def __init__(self) -> None:
        self.known = {1, 2}
        self.ready: set[int] = set()
        self.failing: set[int] = set()
        self.any_node: int | None = None
        self.sent: list[tuple[int, str]] = []

    def send(self, node_id, call, now) -> None:
        self.sent.append((node_id, call.request))
        call.future.set_result(f"answer from {node_id}")

    def queue(self) -> CallQueue:
        return CallQueue(CallHooks(lambda: self.any_node, self.known.__contains__, self.ready.__contains__,
                                   self.failing.__contains__, self.send, lambda node_id: Unknown(node_id),
                                   lambda call, node_id: TimedOut(call.request, node_id),
                                   lambda call, node_id: Unreachable(call.request, node_id)))


def call(node_id, request: str, deadline: float = 10.0, give_up_when_failing: bool = False) -> PendingCall:
    return PendingCall(node_id, request, Future(), deadline, give_up_when_failing)


def test_a_call_waits_until_its_node_is_ready():
    nodes = Nodes()
    queue = nodes.queue()
    waiting = call(1, "a")
    queue.add(waiting, now=0.0)
    assert len(queue) == 1 and not waiting.future.done()
    nodes.ready.add(1)
    queue.dispatch(now=1.0)
    assert len(queue) == 0 and waiting.future.result(0) == "answer from 1" and nodes.sent == [(1, "a")]


def test_a_call_for_any_node_takes_the_one_the_protocol_picks():
    nodes = Nodes()
    queue = nodes.queue()
    anywhere = call(None, "b")
    queue.add(anywhere, now=0.0)
    assert not anywhere.future.done()            # no node to pick yet
    nodes.any_node = 2
    nodes.ready.add(2)
    queue.dispatch(now=0.5)
    assert nodes.sent == [(2, "b")]


def test_deadlines_unknown_nodes_and_closing_end_calls_with_the_protocols_errors():
    nodes = Nodes()
    queue = nodes.queue()
    late, stranger, closing, done = call(1, "late", 5.0), call(7, "x"), call(2, "c"), call(1, "done")
    done.future.set_result("answered elsewhere")
    for pending in (late, stranger, closing, done):
        queue.add(pending, now=0.0)
    with pytest.raises(Unknown):
        stranger.future.result(0)
    queue.dispatch(now=5.0)
    with pytest.raises(TimedOut):
        late.future.result(0)
    assert len(queue) == 1 and nodes.sent == []
    queue.fail_all(lambda: ConnectionError("closed"))
    with pytest.raises(ConnectionError):
        closing.future.result(0)
    assert len(queue) == 0


def test_a_call_that_gives_up_on_a_failing_node_ends_when_its_connection_fails():
    nodes = Nodes()
    queue = nodes.queue()
    patient, impatient = call(1, "patient"), call(1, "impatient", give_up_when_failing=True)
    queue.add(patient, now=0.0)
    queue.add(impatient, now=0.0)
    queue.dispatch(now=1.0)
    assert len(queue) == 2                      # connecting: both wait
    nodes.failing.add(1)
    queue.dispatch(now=2.0)
    with pytest.raises(Unreachable):
        impatient.future.result(0)
    assert not patient.future.done()            # it waits for the node to come back, until its deadline
    nodes.failing.clear()
    nodes.ready.add(1)
    queue.dispatch(now=3.0)
    assert nodes.sent == [(1, "patient")]
