"""Consumer state in Redis: offsets, locks and leases shared by every proxy process (seed 001's structure).

One Redis hash per consumer and topic (cluster consumption: the group shares its queues) or per consumer, topic
and clientId (broadcast consumption: every client has its own progress). A queue is named "broker:queue"
(Kafka: "kafka:<partition>"); its fields in the hash are "<queue>/<field>":

    <queue>/max        the queue's end offset as last seen by a proxy (the seed's mx_offset)
    <queue>/low        its first offset still stored (older ones were deleted by retention)
    <queue>/committed  the next offset to deliver (everything before it is acknowledged)
    <queue>/lock       the timestamp (ms, Redis' clock) of the queue's latest lock; every lock of a queue gets a
                       later one than the lock before, so that it names that lock alone (the ack token carries it)
    <queue>/owned      "1" while that lock is held; it is held for the lease, then the queue is free again
    <queue>/lockat     the committed offset when the queue was last locked
    <queue>/attempts   how many times the messages at lockat were handed out (dead-letter after N)
    <queue>/retry      a nack's delay: the queue is not handed out before this time (ms)
    <queue>/access     when a client last touched the queue (ms)

Keys: "<namespace>:{<consumer>}:<topic>" and "<namespace>:{<consumer>}:<topic>:client:<clientId>", and the
consumer's control hash "<namespace>:{<consumer>}:control" (paused, rate limit and its token bucket). The braces
are a Redis Cluster hash tag: all keys of one consumer live on one shard, so one script may touch them all.
Broadcast hashes expire after client_ttl_ms without a request; cluster hashes are the group's progress and live
until the consumer is deleted.

Every read-modify-write is one Lua script (atomic in Redis): choose+lock (with the piggy-backed ack of the
previous token and the consumer's rate limit in the same script, so that a /message costs one round trip), ack+
unlock, nack (unlock with a delay), and reset. Time is Redis' own (TIME), so proxies on hosts with skewed clocks
agree on leases.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from fastmq.proxy.scripts import Packed, Script, ScriptRunner

_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}\Z")
_QUEUE = re.compile(r"[A-Za-z0-9._-]{1,64}:[0-9]{1,9}\Z")

START_EARLIEST, START_LATEST = "earliest", "latest"


class StateError(ValueError):
    """A name or token that the state cannot hold (the HTTP layer answers 400)."""


# Names found good, so that the few a proxy serves are matched once, not several times per request; emptied
# when it holds CHECKED_NAMES (clientIds come and go).
_checked: set[str] = set()
CHECKED_NAMES = 4096


def check_name(kind: str, value: object) -> str:
    """Consumers, producers, topics and clientIds: Kafka's topic alphabet, so that keys cannot collide."""
    if type(value) is str and value in _checked:
        return value
    if not isinstance(value, str) or not _NAME.match(value):
        raise StateError(f"{kind} must be 1 to 249 characters of A-Z a-z 0-9 . _ -, not {value!r}")
    if len(_checked) >= CHECKED_NAMES:
        _checked.clear()
    _checked.add(value)
    return value


# The values made per request are slotted dataclasses, not frozen ones: a frozen dataclass costs four times as
# much to make (object.__setattr__ per field), and a consume+ack makes about six of them.
@dataclass(slots=True)
class AckToken:
    """broker:queue:offset:next_offset:timestamp (the seed's format): the locked range and the lock's time."""

    queue: str
    offset: int
    next_offset: int
    lock: int

    @classmethod
    def parse(cls, text: str) -> AckToken:
        parts = text.split(":") if isinstance(text, str) else []
        if len(parts) != 5 or not all(p.isdigit() and len(p) <= 19 for p in parts[2:]):
            raise StateError(f"an ack token is broker:queue:offset:next_offset:timestamp, not {text!r}")
        queue = f"{parts[0]}:{parts[1]}"
        if not _QUEUE.match(queue):
            raise StateError(f"bad queue {queue!r} in ack token {text!r}")
        offset, next_offset, lock = (int(p) for p in parts[2:])
        if next_offset < offset:
            raise StateError(f"ack token {text!r}: next_offset is before offset")
        return cls(queue, offset, next_offset, lock)

    def __str__(self) -> str:
        return f"{self.queue}:{self.offset}:{self.next_offset}:{self.lock}"


@dataclass(slots=True)
class QueueBounds:
    """What a proxy knows of a queue from the broker: its first stored offset and its end offset."""

    queue: str
    low: int
    high: int


@dataclass(slots=True)
class Lock:
    """A queue locked for one client: deliver from `offset`; `attempts` counts the deliveries of this offset."""

    queue: str
    offset: int
    high: int
    lock: int
    attempts: int

    def token(self, next_offset: int) -> AckToken:
        return AckToken(self.queue, self.offset, next_offset, self.lock)


@dataclass(slots=True)
class Choice:
    """The outcome of choose+lock: `lock` when a queue was locked, else why not: "empty" (no queue with
    backlog is free), "paused", or "limited" (retry after retry_after_ms)."""

    outcome: str
    lock: Lock | None = None
    retry_after_ms: int = 0


@dataclass(frozen=True)
class QueueProgress:
    queue: str
    max: int
    low: int
    committed: int
    locked: bool
    lock: int
    attempts: int
    access: int

    @property
    def backlog(self) -> int:
        return max(0, self.max - self.committed)


ACK_OK = "ok"
# Why an ack is refused: the lock is not held any more (its lease ran out or it was acked), or the token's
# offsets are not the committed ones (another lock delivered them since).
ACK_EXPIRED, ACK_STALE = "expired", "stale"

# A script reads a queue's fields with one HMGET when it first looks at that queue (ack and nack: the three
# that check() compares; choose+lock: all it decides by), keeps them as numbers in h[queue], and writes what
# changed with one HSET at the end (flush). choose+lock reads the queues in its rotated order and stops at the
# first it can lock: one or a few queues, not the topic's whole hash. Reading the whole hash (HGETALL of 16
# queues' 144 fields, each made a Lua string) cost Redis 58 us of a choose+lock's 62; now it takes 26 us.
_COMMON = """
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h, changed, dirty = {}, {}, {}
-- Read fields of a queue into h[queue] as numbers (an unset field stays nil); a field this script has set
-- already keeps its new value.
local function load(queue, names)
  local q = h[queue]
  if not q then q = {}; h[queue] = q end
  local full = {}
  for i = 1, #names do full[i] = queue .. '/' .. names[i] end
  local values = redis.call('HMGET', key, unpack(full))
  for i = 1, #names do
    if values[i] and not dirty[full[i]] then q[names[i]] = tonumber(values[i]) end
  end
end
local CHECKED = {'owned', 'lock', 'committed'}
local CHOSEN = {'max', 'low', 'committed', 'lock', 'owned', 'lockat', 'attempts', 'retry'}
local function num(queue, name, default)
  local v = h[queue][name]
  if v == nil then return default end
  return v
end
-- Set a field (an integer); flush() writes the fields that changed (or were not read), as decimal text.
local function mark(queue, name, value)
  local q = h[queue]
  if not q then q = {}; h[queue] = q end
  if q[name] == value then return end
  q[name] = value
  local f = queue .. '/' .. name
  if not dirty[f] then dirty[f] = true; table.insert(changed, {f, queue, name}) end
end
local function flush()
  local args = {}
  for _, c in ipairs(changed) do
    table.insert(args, c[1]); table.insert(args, string.format('%.0f', h[c[2]][c[3]]))
  end
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
end
-- The lock of `queue` named by `lock` and `offset` is held and young enough: "ok", else why not.
local function check(queue, offset, lock, lease)
  load(queue, CHECKED)
  if num(queue, 'owned', 0) ~= 1 or num(queue, 'lock', -1) ~= lock then return 'expired' end
  if now - lock > lease then return 'expired' end
  if num(queue, 'committed', -1) ~= offset then return 'stale' end
  return 'ok'
end
local function ack(queue, offset, next_offset, lock, lease)
  local verdict = check(queue, offset, lock, lease)
  if verdict == 'ok' then
    mark(queue, 'committed', next_offset); mark(queue, 'owned', 0); mark(queue, 'attempts', 0)
    mark(queue, 'access', now)
  end
  return verdict
end
"""

# KEYS: state hash, control hash. ARGV: lease_ms, start, rotate, ttl_ms (0: no expiry), ack queue ('' for
# none), ack offset, ack next_offset, ack lock, then n, then n * (queue, low, high).
# Returns {ack verdict or '', outcome, queue, offset, high, lock, attempts} (outcome 'limited': queue = delay).
# A queue's stored bounds (max, low, and committed where it has none yet or retention passed it) are brought up
# to the proxy's when the queue is looked at: at least every n-th choose of a proxy (each starts at another
# queue), and all of them when none can be locked.
CHOOSE_LUA = _COMMON + """
local lease = tonumber(ARGV[1])
local start, rotate, ttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local verdict = ''
if ARGV[5] ~= '' then
  verdict = ack(ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), lease)
end
local function finish(reply)
  flush()
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  return reply
end
local control = redis.call('HMGET', KEYS[2], 'paused', 'rate', 'burst', 'tokens', 'tokens_at')
if control[1] == '1' then return finish({verdict, 'paused'}) end
local rate = tonumber(control[2] or '0')
if rate and rate > 0 then
  local burst = tonumber(control[3] or '0')
  if not burst or burst < 1 then burst = math.max(1, rate) end
  local tokens = tonumber(control[4] or '') or burst
  local since = tonumber(control[5] or '') or now
  tokens = math.min(burst, tokens + (now - since) * rate / 1000)
  if tokens < 1 then
    redis.call('HSET', KEYS[2], 'tokens', tostring(tokens), 'tokens_at', now)
    return finish({verdict, 'limited', string.format('%.0f', math.ceil((1 - tokens) * 1000 / rate))})
  end
  redis.call('HSET', KEYS[2], 'tokens', tostring(tokens - 1), 'tokens_at', now)
end
local n = tonumber(ARGV[9])
for j = 0, n - 1 do
  local i = 10 + 3 * ((j + rotate) % n)
  local queue, low, high = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  load(queue, CHOSEN)
  if high > num(queue, 'max', -1) then mark(queue, 'max', high) end
  mark(queue, 'low', low)
  local committed = num(queue, 'committed', nil)
  if committed == nil then
    if start == 'latest' then committed = high else committed = low end
  elseif committed < low then
    committed = low
  end
  mark(queue, 'committed', committed)
  high = num(queue, 'max', 0)
  local held = num(queue, 'owned', 0) == 1 and now - num(queue, 'lock', 0) <= lease
  if committed < high and not held and num(queue, 'retry', 0) <= now then
    local lock = math.max(now, num(queue, 'lock', 0) + 1)
    local attempts = 1
    if num(queue, 'lockat', -1) == committed then attempts = num(queue, 'attempts', 0) + 1 end
    mark(queue, 'lock', lock); mark(queue, 'owned', 1); mark(queue, 'lockat', committed)
    mark(queue, 'attempts', attempts); mark(queue, 'access', now)
    return finish({verdict, 'locked', queue, string.format('%.0f', committed), string.format('%.0f', high),
                   string.format('%.0f', lock), string.format('%.0f', attempts)})
  end
end
return finish({verdict, 'empty'})
"""

# KEYS: state hash. ARGV: queue, offset, next_offset, lock, lease_ms. Returns the verdict.
ACK_LUA = _COMMON + """
local verdict = ack(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))
flush()
return verdict
"""

# KEYS: state hash. ARGV: queue, offset, lock, lease_ms, delay_ms. Unlocks without committing; the queue is
# handed out again (from the same offset) after the delay. Returns the verdict.
NACK_LUA = _COMMON + """
local queue, offset, lock = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local verdict = check(queue, offset, lock, tonumber(ARGV[4]))
if verdict == 'ok' then
  mark(queue, 'owned', 0); mark(queue, 'retry', now + tonumber(ARGV[5])); mark(queue, 'access', now)
  flush()
end
return verdict
"""

# KEYS: state hash. ARGV: n, n * (queue, offset). Moves committed offsets, dropping locks, delays and attempts:
# whatever was handed out under an old lock can no longer be acked.
RESET_LUA = _COMMON + """
local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local queue, offset = ARGV[2 + 2 * i], tonumber(ARGV[3 + 2 * i])
  mark(queue, 'committed', offset); mark(queue, 'owned', 0); mark(queue, 'attempts', 0); mark(queue, 'retry', 0)
  mark(queue, 'lockat', -1)
end
flush()
return n
"""


_CHOOSE, _ACK, _NACK, _RESET = (Script(source) for source in (CHOOSE_LUA, ACK_LUA, NACK_LUA, RESET_LUA))


class ConsumerState:
    """The consumers' state in one Redis (a redis.asyncio client for plain reads and writes; the scripts go
    through a ScriptRunner's pipelined connection to the same Redis); each method is one round trip. close()
    closes the runner's connection."""

    def __init__(self, redis: Any, namespace: str = "fastmq:proxy") -> None:
        self.redis = redis
        self.namespace = namespace
        self.round_trips = 0
        self.scripts = ScriptRunner(redis)
        # The script arguments of the last bounds list choose() was given, packed once: a backend hands out
        # the same list object until the bounds change.
        self._bounds_args: tuple[Any, Packed | None] = (None, None)

    # ---- keys ------------------------------------------------------------------------------------------

    def state_key(self, consumer: str, topic: str, client_id: str | None = None) -> str:
        """The hash of a cluster consumer's topic (client_id None) or of one broadcast client."""
        key = f"{self.namespace}:{{{check_name('consumer', consumer)}}}:{check_name('topic', topic)}"
        return key if client_id is None else f"{key}:client:{check_name('clientId', client_id)}"

    def control_key(self, consumer: str) -> str:
        return f"{self.namespace}:{{{check_name('consumer', consumer)}}}:control"

    # ---- the scripts --------------------------------------------------------------------------------------

    async def choose(self, consumer: str, topic: str, client_id: str | None, queues: Sequence[QueueBounds], *,
                     lease_ms: int, start: str = START_EARLIEST, rotate: int = 0, ttl_ms: int = 0,
                     ack: AckToken | None = None) -> tuple[str | None, Choice]:
        """Acknowledge `ack` (when given), then lock a free queue with backlog; returns (the ack's verdict or
        None, the choice). `queues` are every queue of the topic with what this proxy knows of its offsets."""
        args: list[Any] = [lease_ms, start, rotate, ttl_ms]
        args += [ack.queue, ack.offset, ack.next_offset, ack.lock] if ack is not None else ["", 0, 0, 0]
        known, packed = self._bounds_args
        if queues is not known or packed is None:
            bounds = list(queues)
            encoded: list[Any] = [len(bounds)]
            for bound in bounds:
                encoded += [bound.queue, bound.low, bound.high]
            packed = Packed(encoded)
            self._bounds_args = (queues, packed)
        self.round_trips += 1
        reply = await self.scripts.run(_CHOOSE, [self.state_key(consumer, topic, client_id),
                                                 self.control_key(consumer)], args, packed)
        verdict = _text(reply[0]) or None
        outcome = _text(reply[1])
        if outcome == "locked":
            queue, offset, high, lock, attempts = _text(reply[2]), *(int(v) for v in reply[3:7])
            return verdict, Choice(outcome, Lock(queue, offset, high, lock, attempts))
        if outcome == "limited":
            return verdict, Choice(outcome, retry_after_ms=int(reply[2]))
        return verdict, Choice(outcome)

    async def ack(self, consumer: str, topic: str, client_id: str | None, token: AckToken, *, lease_ms: int) -> str:
        """Commit the token's range and unlock: ACK_OK, or ACK_EXPIRED / ACK_STALE (nothing changed)."""
        self.round_trips += 1
        reply = await self.scripts.run(_ACK, [self.state_key(consumer, topic, client_id)],
                                       [token.queue, token.offset, token.next_offset, token.lock, lease_ms])
        return _text(reply)

    async def nack(self, consumer: str, topic: str, client_id: str | None, token: AckToken, *, lease_ms: int,
                   delay_ms: int) -> str:
        """Unlock without committing; the range is handed out again after delay_ms."""
        self.round_trips += 1
        reply = await self.scripts.run(_NACK, [self.state_key(consumer, topic, client_id)],
                                       [token.queue, token.offset, token.lock, lease_ms, delay_ms])
        return _text(reply)

    async def reset(self, consumer: str, topic: str, client_id: str | None, offsets: dict[str, int]) -> None:
        args: list[Any] = [len(offsets)]
        for queue, offset in offsets.items():
            args += [queue, offset]
        self.round_trips += 1
        await self.scripts.run(_RESET, [self.state_key(consumer, topic, client_id)], args)

    # ---- plain reads and writes -----------------------------------------------------------------------------

    async def progress(self, consumer: str, topic: str, client_id: str | None = None) -> list[QueueProgress]:
        self.round_trips += 1
        fields = await self.redis.hgetall(self.state_key(consumer, topic, client_id))
        by_queue: dict[str, dict[str, int]] = {}
        for name, value in fields.items():
            queue, _, what = _text(name).rpartition("/")
            by_queue.setdefault(queue, {})[what] = int(float(value))
        return [QueueProgress(queue, v.get("max", 0), v.get("low", 0), v.get("committed", 0),
                              v.get("owned", 0) == 1, v.get("lock", 0), v.get("attempts", 0), v.get("access", 0))
                for queue, v in sorted(by_queue.items(), key=lambda item: queue_order(item[0]))]

    async def clients(self, consumer: str, topic: str) -> list[str]:
        """The clientIds of a broadcast consumer that have state."""
        prefix = self.state_key(consumer, topic) + ":client:"
        found = [_text(key)[len(prefix):] async for key in self.redis.scan_iter(match=_glob_escape(prefix) + "*")]
        return sorted(found)

    async def set_paused(self, consumer: str, paused: bool) -> None:
        await self.redis.hset(self.control_key(consumer), "paused", "1" if paused else "0")

    async def set_rate(self, consumer: str, rate: float, burst: float = 0) -> None:
        """Requests per second over all proxies (0: unlimited), with a burst of `burst` (default: rate)."""
        await self.redis.hset(self.control_key(consumer), mapping={"rate": rate, "burst": burst})

    async def control(self, consumer: str) -> dict[str, str]:
        return {_text(k): _text(v) for k, v in (await self.redis.hgetall(self.control_key(consumer))).items()}

    def close(self) -> None:
        self.scripts.close()

    async def delete(self, consumer: str, topic: str) -> None:
        """Forget a consumer's progress on a topic (the cluster hash and every broadcast client's)."""
        keys = [self.state_key(consumer, topic)]
        keys += [self.state_key(consumer, topic, client) for client in await self.clients(consumer, topic)]
        await self.redis.delete(*keys)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def queue_order(queue: str) -> tuple[str, int]:
    """Sorts queues by broker, then number (kafka:2 before kafka:10)."""
    broker, _, number = queue.rpartition(":")
    return broker, int(number) if number.isdigit() else -1


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)
