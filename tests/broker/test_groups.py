"""The group manager (fastmq/broker/groups.py) on a manual clock: joins, generations, leaders, assignments,
heartbeats, leaving, session and rebalance timeouts, static members, commit validation; then real consumer groups
of two client libraries against the embedded broker."""
from __future__ import annotations

import heapq
import itertools
import threading
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq.broker import groups as g
from fastmq.broker.errors import CoreError
from fastmq.broker.groups import GroupManager, GroupSettings

from tests.support.waiting import wait_for


class ManualTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """The group manager's loop, with time moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._timers: list = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_later(self, delay, callback, *args):
        timer = ManualTimer()
        heapq.heappush(self._timers, (self.now + delay, next(self._order), timer, callback, args))
        return timer

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while self._timers and self._timers[0][0] <= end:
            when, _, timer, callback, args = heapq.heappop(self._timers)
            self.now = max(self.now, when)
            if not timer.cancelled:
                callback(*args)
        self.now = end


PROTOCOLS = [("range", b"meta-range"), ("roundrobin", b"meta-rr")]


class Client:
    """One member's view: what its last join and sync answers were."""

    def __init__(self, manager: GroupManager, group: str = "g", instance: str | None = None,
                 protocols=PROTOCOLS, session_ms: int = 10000, rebalance_ms: int = 20000) -> None:
        self.manager = manager
        self.group = group
        self.instance = instance
        self.protocols = protocols
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.member_id = ""
        self.joined: list[g.JoinResult] = []
        self.synced: list[g.SyncResult] = []

    def join(self, require_known: bool = True) -> None:
        def answer(result: g.JoinResult) -> None:
            self.joined.append(result)
            if result.error in (None, CoreError.MEMBER_ID_REQUIRED):
                self.member_id = result.member_id

        self.manager.join(self.group, self.member_id, self.instance, "client", "/127.0.0.1", self.session_ms,
                              self.rebalance_ms, "consumer", self.protocols, require_known, answer)

    def join_fully(self) -> None:
        self.join()
        if self.joined and self.joined[-1].error == CoreError.MEMBER_ID_REQUIRED:
            self.join()

    @property
    def generation(self) -> int:
        return self.joined[-1].generation

    def sync(self, assignments: dict | None = None) -> None:
        self.manager.sync(self.group, self.generation, self.member_id, self.instance, "consumer", None,
                              assignments or {}, self.synced.append)

    def heartbeat(self) -> int:
        return self.manager.heartbeat(self.group, self.generation, self.member_id, self.instance)


@pytest.fixture
def clock():
    return ManualScheduler()


@pytest.fixture
def manager(clock):
    return GroupManager(clock, GroupSettings(initial_rebalance_delay_ms=0))


def test_two_members_form_one_generation_and_get_their_assignments(manager, clock):
    a, b = Client(manager), Client(manager)
    a.join()
    assert a.joined[-1].error == CoreError.MEMBER_ID_REQUIRED and a.member_id
    a.join()
    # With no delay the first generation completes with a alone (b has not arrived yet).
    assert a.joined[-1].error is None and a.generation == 1 and a.joined[-1].leader == a.member_id
    assert a.joined[-1].members == [(a.member_id, None, b"meta-range")]
    a.sync({a.member_id: b"A1"})
    assert a.synced[-1].assignment == b"A1"
    b.join_fully()          # b joining rebalances; a learns it from its heartbeat and rejoins
    assert not b.joined[-1:] or b.joined[-1].error == CoreError.MEMBER_ID_REQUIRED
    assert a.heartbeat() == CoreError.REBALANCE_IN_PROGRESS
    a.join()
    assert a.generation == b.generation == 2
    leader = [c for c in (a, b) if c.joined[-1].members]
    assert len(leader) == 1 and {m[0] for m in leader[0].joined[-1].members} == {a.member_id, b.member_id}
    follower = b if leader[0] is a else a
    follower.sync()
    assert not follower.synced[-1:] or follower.synced[-1].error != None   # waits for the leader
    pending = len(follower.synced)
    leader[0].sync({a.member_id: b"A2", b.member_id: b"B2"})
    assert len(follower.synced) == pending + 1
    assert a.synced[-1].assignment == b"A2" and b.synced[-1].assignment == b"B2"
    assert a.heartbeat() is None and b.heartbeat() is None
    assert manager.describe("g").state == g.STABLE


def test_leaving_and_expiry_rebalance_the_rest(manager, clock):
    a, b = Client(manager, session_ms=6000), Client(manager, session_ms=6000)
    a.join_fully()
    b.join_fully()
    a.join()
    a.sync({})
    b.sync({})
    assert manager.describe("g").state == g.STABLE and len(manager.describe("g").members) == 2
    assert manager.leave("g", [(b.member_id, None)]) == [(b.member_id, None, None)]
    assert manager.describe("g").state == g.PREPARING_REBALANCE
    a.join()
    assert a.joined[-1].error is None and [m[0] for m in a.joined[-1].members] == [a.member_id]
    a.sync({a.member_id: b"all"})
    # a stops heartbeating: after its session timeout it is gone and the group is empty.
    clock.advance(5.0)
    assert a.heartbeat() is None
    clock.advance(5.9)
    assert manager.describe("g").members
    clock.advance(0.2)
    clock.advance(1.0)
    description = manager.describe("g")
    assert description.state == g.EMPTY and not description.members
    assert a.heartbeat() == CoreError.UNKNOWN_MEMBER


def test_members_that_do_not_rejoin_are_removed_at_the_rebalance_timeout(manager, clock):
    a, b = Client(manager, rebalance_ms=3000), Client(manager, rebalance_ms=3000)
    a.join_fully()
    b.join_fully()
    a.join()
    a.sync({})
    b.sync({})
    generation = a.generation
    a.join(require_known=True)           # a rejoins (e.g. its subscription changed); b never does
    manager.join("g", a.member_id, None, "client", "h", 10000, 3000, "consumer", [("range", b"new")], True,
                     a.joined.append)
    assert manager.describe("g").state == g.PREPARING_REBALANCE
    clock.advance(3.1)
    result = a.joined[-1]
    assert result.error is None and result.generation == generation + 1
    assert [m[0] for m in result.members] == [a.member_id]


def test_leader_that_never_syncs_is_removed(manager, clock):
    a, b = Client(manager, rebalance_ms=2000), Client(manager, rebalance_ms=2000)
    a.join_fully()
    b.join_fully()
    a.join()
    leader, follower = (a, b) if a.joined[-1].members else (b, a)
    follower.sync()
    clock.advance(2.5)
    # The leader is gone; the follower is told to rejoin and becomes the new group alone.
    assert follower.synced[-1].error == CoreError.REBALANCE_IN_PROGRESS
    assert leader.member_id not in {m.member_id for m in manager.describe("g").members}
    follower.join()
    assert follower.joined[-1].error is None and follower.joined[-1].leader == follower.member_id


def test_initial_delay_gathers_members_that_start_together(clock):
    manager = GroupManager(clock, GroupSettings(initial_rebalance_delay_ms=500))
    a, b = Client(manager), Client(manager)
    a.join_fully()
    clock.advance(0.3)
    b.join_fully()
    clock.advance(0.3)                    # the delay restarted when b arrived
    assert len(a.joined) == 1 and len(b.joined) == 1
    clock.advance(0.3)
    assert a.joined[-1].generation == b.joined[-1].generation == 1


def test_static_member_rejoins_without_a_rebalance(manager, clock):
    leader, member = Client(manager, instance="i-1"), Client(manager, instance="i-2")
    leader.join()
    member.join()
    leader.join()
    assert leader.joined[-1].leader == leader.member_id
    leader.sync({leader.member_id: b"L", member.member_id: b"M"})
    member.sync()
    old_id = member.member_id
    restarted = Client(manager, instance="i-2")
    restarted.join()                      # same instance, no member id: takes over without a rebalance
    assert restarted.joined[-1].error is None and restarted.generation == leader.generation
    assert restarted.member_id != old_id
    restarted.sync()
    assert restarted.synced[-1].assignment == b"M"
    assert manager.heartbeat("g", leader.generation, old_id, "i-2") == CoreError.FENCED_INSTANCE
    assert manager.describe("g").state == g.STABLE


def test_join_validation(manager):
    results = []
    manager.join("", "", None, "c", "h", 10000, 10000, "consumer", PROTOCOLS, True, results.append)
    manager.join("g", "", None, "c", "h", 100, 10000, "consumer", PROTOCOLS, True, results.append)
    manager.join("g", "ghost", None, "c", "h", 10000, 10000, "consumer", PROTOCOLS, True, results.append)
    manager.join("g", "", None, "c", "h", 10000, 10000, "consumer", [], True, results.append)
    assert [r.error for r in results] == [CoreError.INVALID_GROUP_ID, CoreError.INVALID_SESSION_TIMEOUT, CoreError.UNKNOWN_MEMBER,
                                          CoreError.INCONSISTENT_GROUP_PROTOCOL]
    a = Client(manager)
    a.join_fully()
    other = Client(manager, protocols=[("cooperative-sticky", b"x")])
    other.join(require_known=False)
    assert other.joined[-1].error == CoreError.INCONSISTENT_GROUP_PROTOCOL


def test_commit_validation_and_deletion(manager):
    assert manager.validate_commit("fresh", -1, "", None) is None
    assert manager.validate_commit("fresh", 1, "m", None) == CoreError.UNKNOWN_MEMBER
    a = Client(manager)
    a.join_fully()
    assert manager.validate_commit("g", a.generation, a.member_id, None) == CoreError.REBALANCE_IN_PROGRESS
    a.sync({a.member_id: b""})
    assert manager.validate_commit("g", a.generation, a.member_id, None) is None
    assert manager.validate_commit("g", a.generation + 1, a.member_id, None) == CoreError.STALE_GENERATION
    assert manager.validate_commit("g", a.generation, "stranger", None) == CoreError.UNKNOWN_MEMBER
    assert manager.delete("g") == CoreError.NON_EMPTY_GROUP
    manager.leave("g", [(a.member_id, None)])
    assert manager.describe("g").state == g.EMPTY
    assert manager.delete("g") is None and manager.describe("g") is None


# -- real clients -----------------------------------------------------------------------------------------------

def _topic_with_records(broker, partitions: int, count: int) -> str:
    from fastmq.kafka import Producer

    topic = f"grp-{uuid.uuid4().hex[:8]}"
    broker.broker.topics.create(topic, partitions)
    with Producer(broker.bootstrap_servers, linger_ms=1) as producer:
        for i in range(count):
            producer.send(topic, b"%d" % i, partition=i % partitions)
        producer.flush(10)
    return topic


@pytest.mark.slow
def test_two_confluent_members_split_partitions_and_one_takes_over(broker):
    import confluent_kafka

    topic = _topic_with_records(broker, 4, 40)
    config = {"bootstrap.servers": broker.bootstrap_servers, "group.id": "split-group", "auto.offset.reset": "earliest",
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "fetch.queue.backoff.ms": 0}
    consumers = [confluent_kafka.Consumer(config), confluent_kafka.Consumer(config)]
    running = [threading.Event(), threading.Event()]
    assignments: list[set] = [set(), set()]
    values: list[bytes] = []
    lock = threading.Lock()

    def poll_loop(index: int) -> None:
        # Each consumer polls from its own thread, as applications do.
        consumer = consumers[index]
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while running[index].is_set() and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                with lock:
                    values.append(message.value())
            assignments[index] = {tp.partition for tp in consumer.assignment()}
        consumer.close()

    threads = [threading.Thread(target=poll_loop, args=(i,), daemon=True) for i in (0, 1)]
    for event, thread in zip(running, threads):
        event.set()
        thread.start()
    try:
        assert wait_for(lambda: [len(a) for a in assignments] == [2, 2] and not assignments[0] & assignments[1], 30)
        assert wait_for(lambda: len(values) == 40, 30)
        running[1].clear()
        threads[1].join(30)
        assert wait_for(lambda: assignments[0] == {0, 1, 2, 3}, 30)
    finally:
        for event in running:
            event.clear()
        for thread in threads:
            thread.join(30)
    assert sorted(int(v) for v in values) == list(range(40))
    assert wait_for(lambda: broker.broker.groups.describe("split-group").state == g.EMPTY)


@pytest.mark.slow
def test_confluent_group_consumes_everything_and_commits(broker):
    import confluent_kafka

    topic = _topic_with_records(broker, 2, 100)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "ck-group",
                                         "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 0,
                                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 100 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            values.append(int(message.value()))
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(values) == list(range(100))
    offsets = broker.broker.offsets
    assert offsets.fetch("ck-group", topic, 0).offset + offsets.fetch("ck-group", topic, 1).offset == 100


# -- any sequence of client actions ---------------------------------------------------------------------------

ACTIONS = st.lists(st.tuples(st.sampled_from(["join", "join_fresh", "sync", "sync_leader", "heartbeat", "leave",
                                              "wait", "commit"]),
                             st.integers(0, 3), st.floats(0, 8)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(ACTIONS, st.sampled_from([0, 300]))
def test_random_client_behaviour_keeps_the_group_consistent(actions, delay_ms):
    clock = ManualScheduler()
    manager = GroupManager(clock, GroupSettings(initial_rebalance_delay_ms=delay_ms))
    clients = [Client(manager, session_ms=6000, rebalance_ms=4000,
                      instance="static" if i == 3 else None) for i in range(4)]
    last_generation = 0
    for action, index, seconds in actions:
        client = clients[index]
        if action == "join":
            client.join()
        elif action == "join_fresh":
            client.member_id = ""
            client.join()
        elif action in ("sync", "sync_leader") and client.joined:
            assignments = {m.member_id: b"x" for m in manager.describe("g").members} \
                if action == "sync_leader" and manager.describe("g") else {}
            client.sync(assignments)
        elif action == "heartbeat" and client.joined:
            client.heartbeat()
        elif action == "leave":
            manager.leave("g", [(client.member_id, client.instance)])
        elif action == "wait":
            clock.advance(seconds)
        elif action == "commit" and client.joined:
            manager.validate_commit("g", client.generation, client.member_id, client.instance)
        group = manager.groups.get("g")
        if group is None:
            continue
        # Invariants: generations only grow; a completing or stable group has a leader among its members;
        # every member id maps back through its instance id; nobody waits in a stable group.
        assert group.generation >= last_generation
        last_generation = group.generation
        if group.state in (g.COMPLETING_REBALANCE, g.STABLE):
            assert group.leader_id in group.members
        if group.state == g.STABLE:
            assert not any(m.join_callback for m in group.members.values())
        for instance, member_id in group.instances.items():
            assert group.members[member_id].instance_id == instance
        assert group.state != g.EMPTY or not group.members
    # Silence: every timer runs out, everyone waiting is answered, every session expires.
    for _ in range(30):
        clock.advance(2)
    group = manager.groups.get("g")
    assert group is None or (group.state == g.EMPTY and not group.members and not group.pending)
