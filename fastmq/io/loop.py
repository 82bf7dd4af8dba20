"""The I/O loop: one thread running epoll over non-blocking sockets, timers, and work handed over by
other threads.

Why level-triggered epoll: a handler reads once per event into a large buffer and returns, so one busy
socket cannot starve the others, and nothing is lost when it stops early (the kernel reports the socket
again on the next poll). Edge-triggered would save the epoll_ctl that switches EPOLLOUT on and off, but
it would force every handler to drain its socket until EAGAIN (one extra syscall per event) and would
never re-report data that a TLS object already pulled off the socket; EPOLLOUT is only switched on when
a write falls short, which is rare, so level-triggered costs nothing on the fast path.

One iteration: poll -> socket events -> due timers -> callbacks handed over (call_soon*) -> poll hooks
(the producer's sender drains ready batches there) -> flush of every connection that queued output, so
that all requests queued in one iteration leave in one sendmsg per connection -> poll again.

Other threads hand work over with call_soon_threadsafe(): an append to a deque under a lock, and an
eventfd write only when the loop is (about to be) asleep in epoll, so a burst of hand-overs costs one
wakeup. Everything else on the loop, on Connection, ConnectionPool and Listener is for the loop thread
only; run_in_loop() runs a function there and waits for its result.

Turns: the loop thread needs the GIL after every system call (epoll, recv, sendmsg), and while another thread
runs Python without pause (a producer's user thread appending records) CPython gives it back only after the
switch interval (5 ms), several times per iteration: a producer's loop then read answers and sent requests once
every 10-35 ms, whatever the broker could take. A thread that has just given the hooks work (a full batch) calls
give_turn(), which wakes the loop and waits, without the GIL, until the loop has run its hooks once; at most once
per TURN_INTERVAL, so that small batches do not pay a thread switch each.
"""
from __future__ import annotations

import heapq
import logging
import os
import select
import socket
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Protocol

from fastmq.io.errors import LoopClosedError

_log = logging.getLogger(__name__)

EPOLLIN = select.EPOLLIN
EPOLLOUT = select.EPOLLOUT

# A heap compaction costs O(n); do it only when cancelled timers are both many and the majority.
_COMPACT_MIN_CANCELLED = 64
# give_turn() hands the loop a turn only when it has not had one for this long (seconds).
TURN_INTERVAL = 0.001
# The longest give_turn() waits for the loop's turn (a loop busy in a long callback, or stopping).
TURN_WAIT = 0.05
# Rounds of callback draining during shutdown, so that a callback that keeps re-scheduling itself
# cannot hold the shutdown forever.
_SHUTDOWN_DRAIN_ROUNDS = 100

AddrInfo = list[tuple[Any, ...]]


class EventHandler(Protocol):
    """What the loop calls for a registered file descriptor (Connection, ServerConnection, Listener)."""

    def handle_events(self, events: int) -> None: ...

    def handle_error(self, error: BaseException) -> None: ...

    def loop_stopped(self) -> None: ...


class TimerHandle:
    """A scheduled call; cancel() may be called from any thread, any number of times."""

    __slots__ = ("when", "_callback", "_args", "_loop")

    def __init__(self, loop: "IOLoop", when: float, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.when = when
        self._callback: Callable[..., Any] | None = callback
        self._args = args
        self._loop = loop

    def cancel(self) -> None:
        if self._callback is not None:
            self._callback = None
            self._args = ()
            self._loop._cancelled_timers += 1

    @property
    def cancelled(self) -> bool:
        """True once cancelled or fired."""
        return self._callback is None

    def __repr__(self) -> str:
        state = "done" if self._callback is None else "pending"
        return f"<TimerHandle when={self.when:.3f} {state}>"


class _Wakeup:
    """The eventfd other threads write to interrupt epoll; reading it resets the counter."""

    __slots__ = ("fd",)

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def handle_events(self, events: int) -> None:
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:
            pass

    def handle_error(self, error: BaseException) -> None:
        _log.error("reading the loop's wakeup eventfd failed", exc_info=error)

    def loop_stopped(self) -> None:
        pass


class IOLoop:
    """One thread running epoll for the connections of one client (or of the embedded broker)."""

    def __init__(self, name: str = "fastmq-io") -> None:
        self.name = name
        self._epoll = select.epoll()
        self._wakeup = _Wakeup()
        self._handlers: dict[int, EventHandler] = {}
        self._epoll.register(self._wakeup.fd, EPOLLIN)
        self._handlers[self._wakeup.fd] = self._wakeup

        # Guards _ready appends from other threads against _closed and decides who writes the eventfd.
        self._lock = threading.Lock()
        self._ready: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._sleeping = False
        self._woken = False   # wakeup() was called since this iteration's hooks started
        self._stopping = False
        self._closed = False

        self._timers: list[tuple[float, int, TimerHandle]] = []
        self._timer_seq = 0
        self._cancelled_timers = 0
        self._hooks: list[Callable[[], float | None]] = []
        # give_turn(): iterations whose hooks ran, when the last one's did, threads waiting for the next.
        self._turns = 0
        self._turn_at = 0.0
        self._turn_waiters = 0
        self._turn_taken = threading.Condition(threading.Lock())
        self._flush_queue: list[Any] = []
        self._resolver: ThreadPoolExecutor | None = None

        self._thread: threading.Thread | None = None
        self._thread_id: int | None = None
        # Time read once per iteration, right after epoll returns: the "now" of everything the
        # iteration does (idle tracking, request deadlines), one clock read per iteration.
        self.now = time.monotonic()

    # ---- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread. The thread is a daemon: a client that is never closed does not keep the
        interpreter alive; close() it to fail pending work cleanly."""
        if self._thread is not None or self._closed:
            raise RuntimeError("an IOLoop can be started only once")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the loop to stop (any thread). Callbacks handed over before stop() still run; then every
        registered connection is closed, failing its pending requests with ConnectionClosedError."""
        with self._lock:
            if self._closed:
                return
            self._stopping = True
            self._wake_locked()
        if self._thread is None:
            self._shutdown()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the loop thread to finish; True when it has (or never started)."""
        thread = self._thread
        if thread is None or thread.ident == threading.get_ident():
            return self._closed
        thread.join(timeout)
        return not thread.is_alive()

    def close(self, timeout: float | None = None) -> bool:
        """stop() and join(); from the loop thread itself it only stops."""
        self.stop()
        return self.join(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self._thread_id

    # ---- handing work over -----------------------------------------------------------------------

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run callback(*args) in this iteration's callback phase. Loop thread only."""
        self._ready.append((callback, args))

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run callback(*args) on the loop thread, soon; callable from any thread. Raises LoopClosedError
        once the loop has shut down (a callback accepted before that always runs)."""
        with self._lock:
            if self._closed:
                raise LoopClosedError(f"I/O loop {self.name!r} is closed; no more work can be handed to it")
            self._ready.append((callback, args))
            if self._sleeping:
                self._wake_locked()

    def call_or_hand_over(self, callback: Callable[..., Any], *args: Any) -> bool:
        """Run callback(*args) now on the loop thread, or hand it to the loop from any other thread. False,
        with nothing run, once the loop has shut down: for work (an answer, a wake-up) that has nobody left to
        serve then."""
        if self.in_loop_thread():
            callback(*args)
            return True
        try:
            self.call_soon_threadsafe(callback, *args)
        except LoopClosedError:
            return False
        return True

    def wakeup(self) -> None:
        """Make the loop run another iteration, with its poll hooks, soon (any thread).

        For a thread that has just given the hooks something to do (the producer's user thread after a
        batch filled up). Costs one attribute read when a wakeup is already pending.
        """
        if self._woken:
            return  # the loop looks at the flag, under the lock, before it goes to sleep
        self._woken = True
        with self._lock:
            if self._sleeping:
                self._wake_locked()

    def give_turn(self) -> None:
        """Wake the loop and wait (up to TURN_WAIT, without the GIL) until it has run its poll hooks once, unless
        it ran them less than TURN_INTERVAL ago (any thread; nothing from the loop thread itself). For a thread
        that has given the hooks work and would otherwise keep the GIL from the loop (see the module docstring)."""
        if (self._thread is None or self._closed or time.monotonic() - self._turn_at < TURN_INTERVAL
                or self.in_loop_thread()):
            self.wakeup()       # no wait, but the work handed over still needs its iteration
            return
        with self._turn_taken:
            start = self._turns
            self._turn_waiters += 1
            try:
                self.wakeup()
                self._turn_taken.wait_for(lambda: self._turns != start or self._closed, TURN_WAIT)
            finally:
                self._turn_waiters -= 1

    def _wake_locked(self) -> None:
        # Only the first hand-over after the loop went to sleep pays for the syscall.
        self._sleeping = False
        try:
            os.eventfd_write(self._wakeup.fd, 1)
        except OSError:  # pragma: no cover - the counter cannot overflow at one write per sleep
            pass

    def run_in_loop(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """Run fn(*args) on the loop thread and return its result (or raise its exception) in the caller.

        From the loop thread itself fn runs directly. Raises TimeoutError when no result came within
        timeout seconds (fn may still run later).
        """
        if self.in_loop_thread():
            return fn(*args)
        if self._thread is None and not self._closed:
            raise RuntimeError(f"I/O loop {self.name!r} is not started; nothing would run {fn!r}")
        future: Future[Any] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)

        self.call_soon_threadsafe(run)
        return future.result(timeout)

    # ---- timers ----------------------------------------------------------------------------------

    def time(self) -> float:
        """The loop's clock: time.monotonic() in seconds."""
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run callback(*args) after delay seconds; any thread."""
        return self.call_at(time.monotonic() + delay, callback, *args)

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run callback(*args) at monotonic time `when`; any thread."""
        handle = TimerHandle(self, when, callback, args)
        if self.in_loop_thread():
            self._push_timer(handle)
        else:
            self.call_soon_threadsafe(self._push_timer, handle)
        return handle

    def _push_timer(self, handle: TimerHandle) -> None:
        if handle._callback is None:
            return
        self._timer_seq += 1
        heapq.heappush(self._timers, (handle.when, self._timer_seq, handle))

    def _run_due_timers(self, now: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now:
            handle = heapq.heappop(timers)[2]
            callback = handle._callback
            if callback is None:
                self._cancelled_timers -= 1
                continue
            args = handle._args
            handle._callback = None
            handle._args = ()
            try:
                callback(*args)
            except Exception:
                _log.exception("timer callback %r failed", callback)
        if self._cancelled_timers > _COMPACT_MIN_CANCELLED and self._cancelled_timers * 2 > len(timers):
            self._timers = [entry for entry in timers if entry[2]._callback is not None]
            heapq.heapify(self._timers)
            self._cancelled_timers = 0

    # ---- poll hooks and output flushing ----------------------------------------------------------

    def add_poll_hook(self, hook: Callable[[], float | None]) -> None:
        """Call hook() once per iteration, after callbacks and before output is flushed (any thread).

        The hook returns the longest time in seconds the loop may sleep before calling it again (for
        example the time until the next linger expiry), or None for no limit. Hooks must be cheap.
        """
        with self._lock:
            self._hooks = self._hooks + [hook]
            self._wake_locked()

    def remove_poll_hook(self, hook: Callable[[], float | None]) -> None:
        """Stop calling hook; by equality, not identity: every `obj.method` makes a new bound method object."""
        with self._lock:
            self._hooks = [h for h in self._hooks if h != hook]

    def schedule_flush(self, stream: Any) -> None:
        """Have stream.flush() called at the end of this iteration. Loop thread only."""
        self._flush_queue.append(stream)

    # ---- file descriptors ------------------------------------------------------------------------

    def add_handler(self, fd: int, handler: EventHandler, events: int) -> None:
        self._epoll.register(fd, events)
        self._handlers[fd] = handler

    def modify_handler(self, fd: int, events: int) -> None:
        self._epoll.modify(fd, events)

    def remove_handler(self, fd: int) -> None:
        """Unregister fd; call it before closing the socket."""
        if self._handlers.pop(fd, None) is not None:
            try:
                self._epoll.unregister(fd)
            except (OSError, ValueError):
                pass

    # ---- name resolution -------------------------------------------------------------------------

    def getaddrinfo(self, host: str, port: int,
                    callback: Callable[[AddrInfo | None, BaseException | None], Any]) -> None:
        """Resolve host:port for a TCP connection and call callback(addrinfos, error) on the loop thread.

        Numeric addresses are resolved inline; names go to one resolver thread so that a slow DNS
        server never blocks the loop. Loop thread only.
        """
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        except socket.gaierror:
            pass
        else:
            self.call_soon(callback, infos, None)
            return
        if self._resolver is None:
            self._resolver = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.name}-resolver")
        future = self._resolver.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)

        def deliver(done: Future[AddrInfo]) -> None:
            error = done.exception() if not done.cancelled() else LoopClosedError("resolution cancelled")
            try:
                self.call_soon_threadsafe(callback, None if error else done.result(), error)
            except LoopClosedError:
                pass

        future.add_done_callback(deliver)

    # ---- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        self._thread_id = threading.get_ident()
        try:
            while not self._stopping:
                self._run_once()
        except BaseException:  # pragma: no cover - a bug in the loop itself; keep the process alive
            _log.exception("I/O loop %r crashed; closing its connections", self.name)
        finally:
            self._shutdown()

    def _run_once(self) -> None:
        timeout = -1.0
        self._woken = False
        for hook in self._hooks:
            try:
                limit = hook()
            except Exception:
                _log.exception("poll hook %r failed", hook)
                continue
            if limit is not None and (timeout < 0 or limit < timeout):
                timeout = limit if limit > 0 else 0.0
        self._turns += 1
        self._turn_at = self.now
        if self._turn_waiters:
            with self._turn_taken:
                self._turn_taken.notify_all()
        if self._flush_queue:
            self._flush_pending()
        if self._timers and timeout != 0:
            until_timer = self._timers[0][0] - time.monotonic()
            if until_timer <= 0:
                timeout = 0.0
            elif timeout < 0 or until_timer < timeout:
                timeout = until_timer
        if timeout != 0:
            with self._lock:
                if self._ready or self._stopping or self._woken:
                    timeout = 0.0
                else:
                    self._sleeping = True
        try:
            events = self._epoll.poll(timeout)
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
            events = []
        self._sleeping = False
        now = self.now = time.monotonic()
        handlers = self._handlers
        for fd, mask in events:
            handler = handlers.get(fd)
            if handler is None:
                continue
            try:
                handler.handle_events(mask)
            except Exception as exc:
                _log.exception("I/O handler %r failed", handler)
                try:
                    handler.handle_error(exc)
                except Exception:
                    _log.exception("closing I/O handler %r failed", handler)
                    self.remove_handler(fd)
        if self._timers:
            self._run_due_timers(now)
        ready = self._ready
        for _ in range(len(ready)):
            callback, args = ready.popleft()
            try:
                callback(*args)
            except Exception:
                _log.exception("callback %r failed", callback)

    def _flush_pending(self) -> None:
        queue = self._flush_queue
        self._flush_queue = []
        for stream in queue:
            try:
                stream.flush()
            except Exception as exc:
                _log.exception("flushing %r failed", stream)
                stream.handle_error(exc)

    def _drain_ready(self) -> None:
        for _ in range(_SHUTDOWN_DRAIN_ROUNDS):
            ready = self._ready
            if not ready:
                return
            for _ in range(len(ready)):
                callback, args = ready.popleft()
                try:
                    callback(*args)
                except Exception:
                    _log.exception("callback %r failed during shutdown", callback)
        if self._ready:
            _log.error("I/O loop %r: %d callbacks still re-scheduling themselves at shutdown were dropped",
                       self.name, len(self._ready))
            self._ready.clear()

    def _shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with self._turn_taken:
            self._turn_taken.notify_all()
        self._drain_ready()
        for handler in list(self._handlers.values()):
            if handler is self._wakeup:
                continue
            try:
                handler.loop_stopped()
            except Exception:
                _log.exception("closing %r at loop shutdown failed", handler)
        self._drain_ready()
        if self._flush_queue:
            self._flush_queue.clear()
        self._timers.clear()
        self._hooks = []
        if self._resolver is not None:
            self._resolver.shutdown(wait=False, cancel_futures=True)
        self._handlers.clear()
        self._epoll.close()
        os.close(self._wakeup.fd)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self.running else "idle"
        return f"<IOLoop {self.name!r} {state} fds={len(self._handlers) - 1} timers={len(self._timers)}>"
