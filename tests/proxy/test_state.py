"""fastmq/proxy/state.py against a real Redis: choose+lock, ack+unlock, leases, nack, reset, broadcast, pause,
rate limits, and many threads racing choose+lock on one queue."""
from __future__ import annotations

import asyncio
import threading

import pytest
import redis.asyncio as aioredis
from hypothesis import given, strategies as st

from fastmq.proxy.state import (ACK_EXPIRED, ACK_OK, ACK_STALE, AckToken, ConsumerState, QueueBounds,
                                StateError, check_name)

Q0, Q1 = "kafka:0", "kafka:1"


def run(coroutine_function, redis_url: str, namespace: str):
    async def main():
        client = aioredis.from_url(redis_url)
        state = ConsumerState(client, namespace)
        try:
            return await coroutine_function(state)
        finally:
            state.close()
            await client.aclose()
    return asyncio.run(main())


def test_choose_locks_a_queue_with_backlog_and_ack_commits_and_unlocks(redis_url, namespace):
    async def scenario(state: ConsumerState):
        bounds = [QueueBounds(Q0, 0, 0), QueueBounds(Q1, 0, 5)]
        verdict, choice = await state.choose("g", "t", None, bounds, lease_ms=10_000)
        assert verdict is None and choice.outcome == "locked"
        lock = choice.lock
        assert (lock.queue, lock.offset, lock.high, lock.attempts) == (Q1, 0, 5, 1)
        # Q1 is held and Q0 has no backlog: nothing else to hand out.
        assert (await state.choose("g", "t", None, bounds, lease_ms=10_000))[1].outcome == "empty"
        assert await state.ack("g", "t", None, lock.token(3), lease_ms=10_000) == ACK_OK
        # The same token again: the lock is gone.
        assert await state.ack("g", "t", None, lock.token(3), lease_ms=10_000) == ACK_EXPIRED
        _, again = await state.choose("g", "t", None, bounds, lease_ms=10_000)
        assert (again.lock.queue, again.lock.offset, again.lock.attempts) == (Q1, 3, 1)
        assert again.lock.lock > lock.lock
        progress = {p.queue: p for p in await state.progress("g", "t")}
        assert progress[Q1].committed == 3 and progress[Q1].locked and progress[Q1].backlog == 2
        assert progress[Q0].backlog == 0 and not progress[Q0].locked
    run(scenario, redis_url, namespace)


def test_a_lease_that_runs_out_frees_the_queue_and_refuses_the_late_ack(redis_url, namespace):
    async def scenario(state: ConsumerState):
        bounds = [QueueBounds(Q0, 0, 4)]
        _, first = await state.choose("g", "t", None, bounds, lease_ms=200)
        assert first.outcome == "locked"

        async def relocked():
            for _ in range(200):
                _, choice = await state.choose("g", "t", None, bounds, lease_ms=200)
                if choice.outcome == "locked":
                    return choice
                await asyncio.sleep(0.02)
            raise AssertionError("the queue was not free again within 4 s of a 0.2 s lease")
        second = await relocked()
        assert (second.lock.offset, second.lock.attempts) == (0, 2)
        assert await state.ack("g", "t", None, first.lock.token(4), lease_ms=200) == ACK_EXPIRED
        assert await state.ack("g", "t", None, second.lock.token(4), lease_ms=10_000) == ACK_OK
    run(scenario, redis_url, namespace)


def test_stale_ack_and_piggy_backed_ack(redis_url, namespace):
    async def scenario(state: ConsumerState):
        bounds = [QueueBounds(Q0, 0, 10)]
        _, choice = await state.choose("g", "t", None, bounds, lease_ms=10_000)
        token = choice.lock.token(4)
        wrong = AckToken(token.queue, 2, 4, token.lock)
        assert await state.ack("g", "t", None, wrong, lease_ms=10_000) == ACK_STALE
        verdict, next_choice = await state.choose("g", "t", None, bounds, lease_ms=10_000, ack=token)
        assert verdict == ACK_OK and next_choice.lock.offset == 4
    run(scenario, redis_url, namespace)


def test_nack_redelivers_after_the_delay_and_counts_attempts(redis_url, namespace):
    async def scenario(state: ConsumerState):
        bounds = [QueueBounds(Q0, 0, 1)]
        _, choice = await state.choose("g", "t", None, bounds, lease_ms=10_000)
        assert await state.nack("g", "t", None, choice.lock.token(1), lease_ms=10_000, delay_ms=300) == ACK_OK
        assert (await state.choose("g", "t", None, bounds, lease_ms=10_000))[1].outcome == "empty"
        for _ in range(200):
            _, again = await state.choose("g", "t", None, bounds, lease_ms=10_000)
            if again.outcome == "locked":
                break
            await asyncio.sleep(0.02)
        assert (again.outcome, again.lock.offset, again.lock.attempts) == ("locked", 0, 2)
    run(scenario, redis_url, namespace)


def test_start_latest_reset_retention_and_broadcast_clients(redis_url, namespace):
    async def scenario(state: ConsumerState):
        assert (await state.choose("late", "t", None, [QueueBounds(Q0, 0, 7)], lease_ms=10_000,
                                   start="latest"))[1].outcome == "empty"
        await state.reset("late", "t", None, {Q0: 5})
        _, choice = await state.choose("late", "t", None, [QueueBounds(Q0, 0, 7)], lease_ms=10_000)
        assert choice.lock.offset == 5
        # Retention deleted offsets below 6: the committed offset follows.
        await state.reset("late", "t", None, {Q0: 2})
        _, choice = await state.choose("late", "t", None, [QueueBounds(Q0, 6, 7)], lease_ms=10_000)
        assert choice.lock.offset == 6
        # Broadcast: every clientId has its own progress, and its hash expires.
        for client in ("a", "b", "c"):
            _, choice = await state.choose("b", "t", client, [QueueBounds(Q0, 0, 3)], lease_ms=10_000, ttl_ms=60_000)
            assert (choice.lock.offset, choice.lock.attempts) == (0, 1)
            assert await state.ack("b", "t", client, choice.lock.token(3), lease_ms=10_000) == ACK_OK
        assert await state.clients("b", "t") == ["a", "b", "c"]
        assert 0 < await state.redis.pttl(state.state_key("b", "t", "a")) <= 60_000
        await state.delete("b", "t")
        assert await state.clients("b", "t") == []
    run(scenario, redis_url, namespace)


def test_pause_and_rate_limit(redis_url, namespace):
    async def scenario(state: ConsumerState):
        bounds = [QueueBounds(Q0, 0, 100), QueueBounds(Q1, 0, 100)]
        await state.set_paused("g", True)
        assert (await state.choose("g", "t", None, bounds, lease_ms=10_000))[1].outcome == "paused"
        await state.set_paused("g", False)
        await state.set_rate("g", 1, burst=1)
        assert (await state.choose("g", "t", None, bounds, lease_ms=10_000))[1].outcome == "locked"
        limited = (await state.choose("g", "t", None, bounds, lease_ms=10_000))[1]
        assert limited.outcome == "limited" and 0 < limited.retry_after_ms <= 1000
    run(scenario, redis_url, namespace)


def test_many_threads_racing_choose_and_lock_never_share_a_queue(redis_url, namespace):
    """12 threads, each with its own connection, lock the one queue of a topic, hold it, check that nobody else
    holds it, and ack one offset: every offset is acked exactly once and no two threads ever held it at once."""
    threads, offsets = 12, 100
    owners: set[int] = set()
    guard = threading.Lock()
    overlaps: list[tuple[int, int]] = []
    acked: list[int] = []
    errors: list[BaseException] = []

    def worker(number: int) -> None:
        async def loop(state: ConsumerState):
            bounds = [QueueBounds(Q0, 0, offsets)]
            for _ in range(5000):
                if len(acked) >= offsets:
                    return
                _, choice = await state.choose("race", "t", None, bounds, lease_ms=30_000, rotate=number)
                if choice.outcome != "locked":
                    await asyncio.sleep(0)
                    continue
                with guard:
                    if owners:
                        overlaps.append((number, choice.lock.offset))
                    owners.add(number)
                await asyncio.sleep(0)
                with guard:
                    owners.discard(number)
                    acked.append(choice.lock.offset)
                assert await state.ack("race", "t", None, choice.lock.token(choice.lock.offset + 1),
                                       lease_ms=30_000) == ACK_OK
        try:
            run(loop, redis_url, namespace)
        except BaseException as exc:       # reported by the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(60)
    assert not any(thread.is_alive() for thread in workers)
    assert not errors, errors
    assert overlaps == []
    assert sorted(acked) == list(range(offsets))


@given(st.text(max_size=60))
def test_token_parser_accepts_only_its_format(text):
    try:
        token = AckToken.parse(text)
    except StateError:
        return
    assert AckToken.parse(str(token)) == token
    assert 0 <= token.offset <= token.next_offset and token.lock >= 0


@given(st.text(min_size=1, max_size=10, alphabet="abc09._-"), st.integers(0, 10**9), st.integers(0, 10**6),
       st.integers(0, 2**62))
def test_token_round_trip(broker, offset, count, lock):
    token = AckToken(f"{broker}:{offset % 1000}", offset, offset + count, lock)
    assert AckToken.parse(str(token)) == token


@pytest.mark.parametrize("name", ["", "a}b", "a:b", "x" * 250, "é"])
def test_names_outside_the_alphabet_are_refused(name):
    with pytest.raises(StateError, match="consumer must be"):
        check_name("consumer", name)


def test_scripts_run_again_after_redis_forgot_them(redis_url, namespace):
    """SCRIPT FLUSH (as a Redis restart does): the next call is answered NOSCRIPT and sends the script itself."""
    async def scenario(state: ConsumerState):
        bounds = [QueueBounds(Q0, 0, 3)]
        _, first = await state.choose("g", "t", None, bounds, lease_ms=10_000)
        await state.redis.script_flush()
        assert await state.ack("g", "t", None, first.lock.token(2), lease_ms=10_000) == ACK_OK
        _, again = await state.choose("g", "t", None, bounds, lease_ms=10_000)
        assert (again.lock.offset, again.lock.attempts) == (2, 1)
    run(scenario, redis_url, namespace)


def test_calls_of_one_loop_turn_share_one_write_and_get_their_own_replies(redis_url, namespace):
    """Auto-pipelining: many concurrent scripts, each answered with its own reply (FIFO over one connection)."""
    async def scenario(state: ConsumerState):
        queues = [f"kafka:{n}" for n in range(40)]
        bounds = [QueueBounds(q, 0, 1) for q in queues]
        results = await asyncio.gather(*(state.choose(f"g{n}", "t", None, bounds[n:n + 1], lease_ms=10_000)
                                         for n in range(40)))
        assert [choice.lock.queue for _, choice in results] == queues
    run(scenario, redis_url, namespace)
