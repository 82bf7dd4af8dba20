# cython: language_level=3
"""Which of the accumulator's partitions may send now (accumulator.pyx's "ready set"); the accumulator's lock is
held by every caller.

ready() and drain() cost what is ready, not what exists: a partition enters the `due` set when its batch fills (or
at once, when nothing may wait), and otherwise a timer heap holds its linger or backoff deadline until it passes;
flush, close and memory pressure make every partition with unsent batches due once. A ready node also takes the
batches of its other partitions that still linger (kept per leader in `lingering`), as the Java client's drain
does: with thousands of partitions each holding a few records, linger then bounds the requests per node, not the
requests per partition.
"""
import heapq

cimport cython
from libc.stdint cimport int32_t

from fastmq._native.partition_queues cimport PartitionQueue
from fastmq._native.producer_batch cimport BATCH_CLOSED, ProducerBatch


cdef object _heappush = heapq.heappush
cdef object _heappop = heapq.heappop


@cython.final
cdef class ReadySet:
    """The due partitions, the timers of those that wait, and the lingering ones per leader."""

    def __cinit__(self, double linger, int max_in_flight, bint idempotent):
        self.due = {}
        self.timers = []
        self.lingering = {}
        self.linger = linger
        self.max_in_flight = max_in_flight
        self.idempotent = idempotent

    cdef bint make_due(self, PartitionQueue queue) except -1:
        # Returns whether the queue was not due before (the sender should look).
        if queue.due:
            return False
        queue.due = True
        self.due[queue] = None
        return True

    cdef bint schedule(self, PartitionQueue queue, double deadline) except -1:
        # Makes the queue due at `deadline`; returns whether that is now the earliest deadline (the sender
        # may be sleeping past it).
        if queue.due or 0 <= queue.scheduled <= deadline:
            return False
        queue.scheduled = deadline
        self.timers_pushed += 1
        _heappush(self.timers, (deadline, self.timers_pushed, queue))
        return self.timers[0][2] is queue

    cdef int linger_on_leader(self, PartitionQueue queue) except -1:
        # Registers a queue whose batch waits for its linger with its leader: when that node sends anyway,
        # the batch goes along (ready()).
        cdef int32_t node = queue.topic.leaders[queue.partition]
        if node >= 0 and queue.lingering_on != node:
            queue.lingering_on = node
            entries = self.lingering.get(node)
            if entries is None:
                entries = self.lingering[node] = {}
            entries[queue] = None
        return 0

    cdef int add_lingering(self, int32_t node, list queues) except -1:
        # A request goes to `node` now: its partitions whose batches wait for their linger join it (as the
        # Java client's drain takes every partition of a ready node), so that many partitions, each with a
        # little data, make one request per linger, not one per partition's linger expiry.
        cdef PartitionQueue queue
        cdef ProducerBatch first
        entries = self.lingering.pop(node, None)
        if entries is None:
            return 0
        for queue in entries:
            if queue.lingering_on != node:
                continue
            queue.lingering_on = -1
            if queue.due or queue.in_flight >= self.max_in_flight or queue.topic.leaders[queue.partition] != node:
                continue        # already among the queues, or waits for an answer or for metadata
            first = first_unsent(queue)
            if first is not None and not first.attempts and not (queue.in_flight and self.sends_alone(queue, first)):
                queues.append(queue)                        # (a retry waits out its backoff)
        return 0

    cdef bint sends_alone(self, PartitionQueue queue, ProducerBatch first):
        # Idempotence: a batch that goes out while another of its partition is in flight may be written before
        # it. One case must not: any batch before the partition's first acknowledgement under this producer id
        # (a broker that has no state for the producer takes whatever sequence comes first: a later batch
        # would leave the first one an OUT_OF_ORDER_SEQUENCE for good). Retries go out pipelined, as first
        # sends do: a broker takes a connection's requests in order, and one that arrives ahead of an earlier
        # batch's retry is refused (OUT_OF_ORDER_SEQUENCE, retried after it) without being written; one at a
        # time, the batches in flight to a leader that died came back a round trip each.
        return self.idempotent and not queue.acknowledged

    cdef tuple collect(self, double now, bint urgent):
        # RecordAccumulator.ready(): the due queues (and those whose deadline passed) by leader.
        cdef dict nodes = {}
        cdef list unknown = []
        cdef PartitionQueue queue
        cdef ProducerBatch first
        cdef double next_check = -1, due
        cdef int32_t node
        while self.timers and self.timers[0][0] <= now:
            due, _, queue = _heappop(self.timers)
            if queue.scheduled == due:
                queue.scheduled = -1
            self.make_due(queue)
        for queue in list(self.due):
            if queue.in_flight >= self.max_in_flight:
                continue                    # stays due: an answer frees a slot
            first = first_unsent(queue)
            if first is None:
                del self.due[queue]
                queue.due = False
                continue
            if queue.in_flight and self.sends_alone(queue, first):
                continue                    # stays due: the answer in flight decides
            if first.attempts:
                due = first.retry_after
            elif first.state == BATCH_CLOSED or urgent:
                due = now
            else:
                due = first.created + self.linger
            if due > now:
                del self.due[queue]
                queue.due = False
                self.schedule(queue, due)
                if not first.attempts:
                    self.linger_on_leader(queue)
                continue
            node = queue.topic.leaders[queue.partition]
            if node < 0:
                if queue.topic.name not in unknown:
                    unknown.append(queue.topic.name)
                continue
            nodes.setdefault(node, []).append(queue)
        for node, queues in nodes.items():
            self.add_lingering(node, queues)
        if self.timers:
            next_check = max(self.timers[0][0] - now, 0.0)
        return nodes, (None if next_check < 0 else next_check), unknown
