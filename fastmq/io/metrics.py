"""Plain counters of one client's network activity, shared by its connections and read by the client.

Attributes are updated on the loop thread and may be read from any thread (each read is of one int or
float; a snapshot taken while the loop runs may mix two instants). Requests that a client thread wrote itself
(Connection.request_now, call_blocking) are counted apart, in direct_requests and direct_bytes_out, and so are
the responses such a thread read itself (direct_responses, direct_bytes_in), under a lock of their own: an
increment from another thread beside the loop's could lose one of the two.
"""
from __future__ import annotations

import threading


class IOMetrics:
    """Byte, request and connection counters; request latency as a sum, a count and a maximum."""

    __slots__ = (
        "bytes_in", "bytes_out", "requests_sent", "responses_received", "request_latency_total",
        "request_latency_max", "request_timeouts", "connections_created", "connections_closed",
        "connect_failures", "connections_rejected", "direct_requests", "direct_bytes_out", "direct_responses",
        "direct_bytes_in", "_direct_lock",
    )

    def __init__(self) -> None:
        self.bytes_in = 0                    # bytes received on all connections
        self.bytes_out = 0                   # bytes handed to the kernel on all connections
        self.requests_sent = 0               # requests queued, with or without an expected response
        self.responses_received = 0          # responses matched to their request
        self.request_latency_total = 0.0     # seconds from queueing to response, summed
        self.request_latency_max = 0.0       # the slowest response so far, in seconds
        self.request_timeouts = 0            # connections closed because a request timed out
        self.connections_created = 0        # client connections started and server connections accepted
        self.connections_closed = 0          # connections closed for any reason
        self.connect_failures = 0            # connections that closed before becoming ready
        self.connections_rejected = 0        # accepted sockets closed at once by a connection limit
        self.direct_requests = 0             # requests written by the thread that made them (not in requests_sent)
        self.direct_bytes_out = 0            # bytes those threads handed to the kernel (not in bytes_out)
        self.direct_responses = 0            # responses read by the thread that waited for them (not in
                                             # responses_received nor in the latency figures)
        self.direct_bytes_in = 0             # bytes those threads received (not in bytes_in)
        self._direct_lock = threading.Lock()

    def count_direct(self, sent: int, received: int = 0, responses: int = 0) -> None:
        """Count one request written by a client thread, of which `sent` bytes were taken at once (the rest
        is written by the loop and counted in bytes_out), and the `received` bytes that thread read waiting for
        its response (Connection.call_blocking) with the responses it took itself (0 when it handed what it read
        to the loop). Any thread."""
        with self._direct_lock:
            self.direct_requests += 1
            self.direct_bytes_out += sent
            self.direct_responses += responses
            self.direct_bytes_in += received

    @property
    def request_latency_avg(self) -> float:
        """Mean request latency in seconds (0.0 before the first response)."""
        return self.request_latency_total / self.responses_received if self.responses_received else 0.0

    def snapshot(self) -> dict[str, float]:
        """All counters as a dict, plus request_latency_avg."""
        values: dict[str, float] = {name: getattr(self, name) for name in self.__slots__ if name[0] != "_"}
        values["request_latency_avg"] = self.request_latency_avg
        return values

    def __repr__(self) -> str:
        return f"<IOMetrics in={self.bytes_in} out={self.bytes_out} requests={self.requests_sent}>"
