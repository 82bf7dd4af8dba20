# cython: language_level=3
"""The consumer's per-partition fetch bookkeeping: the state of one assigned partition, and the loops of the
fetcher (fastmq/kafka/fetcher.py) that walk many partitions per request or response.

A Fetch to a node lists every partition of that node that can be fetched (a fetch session sends only what
changed, but the client still decides it for all of them), and its answer frees them all again; the response
carries data for as many partitions as its max_bytes holds. So over thousands of partitions the client does a
little work per partition per request for a few records each, and that work was Python: at 4096 partitions it
took more CPU than decoding the records. Here the partition's state is a C struct and those loops are compiled;
what is rare (errors, offset lookups, logging) stays in the fetcher.

The fields keep PartitionState's Python meaning (assignable from Python, None where a value is not known yet).
The loop thread owns everything but `position`, `leader_epoch` (the user's thread, under the subscription's
lock, or the loop thread before the user sees records) and `drained` (the user's thread only).
"""
cimport cython
from libc.math cimport INFINITY
from libc.stdint cimport int64_t

from fastmq.kafka._native.records cimport record_set_end


@cython.final
cdef class PartitionState:
    """One assigned partition."""

    cdef public object tp
    cdef public object position             # next offset handed to the user (user thread); None: not known
    cdef public object leader_epoch         # leader epoch of the last record handed out
    cdef public long long epoch             # bumped whenever fetched data becomes stale
    cdef public bint paused
    cdef public object reset_to             # EARLIEST / LATEST: an offset lookup is wanted; None: not
    cdef public long long reset_epoch       # epoch of the reset request in flight (loop thread)
    cdef public object highwater            # from the last fetch response; None until then
    cdef public object last_stable_offset
    cdef public object log_start_offset
    # Loop thread only:
    cdef public object fetch_offset         # next offset to fetch, valid while fetch_epoch == epoch
    cdef public long long fetch_epoch
    cdef public bint in_flight              # a fetch for this partition is on the wire
    cdef public bint scan_ahead             # the next fetch may leave before a record set is decoded (see
                                            # sort_response); off after a decode disagreed, until one agrees
    cdef public long long queued            # completed fetches buffered so far (loop thread) ...
    cdef public long long drained           # ... and handed out or dropped (user thread): one writer each
    cdef public long long waiting           # record sets fetched ahead of their decode (sort_response), not
                                            # decoded yet: they count toward the prefetch depth as queued ones
    cdef public double retry_at             # no fetch or reset before this monotonic time
    # The leader and leader epoch the metadata named at metadata_version: looked up again when it moves.
    cdef long long leader
    cdef long long metadata_leader_epoch
    cdef long long metadata_version

    def __init__(self, tp):
        self.tp = tp
        self.position = None
        self.leader_epoch = -1
        self.epoch = 0
        self.paused = False
        self.reset_to = None
        self.reset_epoch = -1
        self.highwater = None
        self.last_stable_offset = None
        self.log_start_offset = None
        self.fetch_offset = None
        self.fetch_epoch = -1
        self.in_flight = False
        self.scan_ahead = True
        self.queued = 0
        self.drained = 0
        self.waiting = 0
        self.retry_at = 0.0
        self.metadata_version = -1

    @property
    def has_position(self):
        return self.position is not None

    @property
    def awaiting_reset(self):
        return self.reset_to is not None

    def is_fetchable(self):
        return self.position is not None and not self.paused

    def __repr__(self):
        return (f"<PartitionState {self.tp.topic}-{self.tp.partition} position={self.position} epoch={self.epoch}"
                f"{' paused' if self.paused else ''}{' reset' if self.reset_to is not None else ''}>")

    cdef inline long long leader_in(self, object cluster, long long version) except? -2:
        if self.metadata_version != version:
            self.leader = cluster.leader_for(self.tp)
            self.metadata_leader_epoch = cluster.leader_epoch_for(self.tp)
            self.metadata_version = version
        return self.leader


@cython.final
cdef class CompletedFetch:
    """One partition of one Fetch response, decoded, waiting for the user."""

    cdef public PartitionState state
    cdef public long long epoch             # the partition's epoch when the fetch was sent
    cdef public object position             # where the user's position must be for the next record to go out
    cdef public list records
    cdef public object next_offset          # position once every record is handed out (control batches count)
    cdef public object error
    cdef public double bytes_per_record
    cdef public Py_ssize_t index
    cdef public Py_ssize_t size             # bytes of the fetched record set, counted against the buffer budget

    def __init__(self, PartitionState state, long long epoch, position, list records not None, next_offset, error,
                 double bytes_per_record=0.0, Py_ssize_t index=0, Py_ssize_t size=0):
        self.state = state
        self.epoch = epoch
        self.position = position
        self.records = records
        self.next_offset = next_offset
        self.error = error
        self.bytes_per_record = bytes_per_record
        self.index = index
        self.size = size


def sort_visits(visit, dict assignment not None, double now, cluster, Py_ssize_t prefetch_depth):
    """Sorts the partitions a loop turn looks at: (fetches {leader: [(state, epoch, fetch_offset)]}, offset
    lookups {leader: [(state, epoch)]}, partitions without a leader, the earliest retry_at of those in a backoff
    (inf: none)). A partition whose fetch position moved to a new epoch fetches from its position. Call with
    the subscription's lock held."""
    cdef dict fetches = {}, resets = {}, by_leader
    cdef list leaderless = [], items
    cdef tuple item
    cdef double retry_due = INFINITY
    cdef long long version = cluster.version, leader, epoch
    cdef PartitionState state
    for state in visit:
        if assignment.get(state.tp) is not state:
            continue                                # revoked since it was touched
        if now < state.retry_at:
            if state.retry_at < retry_due:
                retry_due = state.retry_at
            continue
        epoch = state.epoch
        if state.reset_to is not None:
            if state.reset_epoch == epoch:
                continue                            # a lookup is on the wire; its answer rescans
            by_leader, item = resets, (state, epoch)
        else:
            if (state.position is None or state.paused or state.in_flight
                    or state.queued - state.drained + state.waiting >= prefetch_depth):
                continue                            # a change, the fetch's answer or drain() touches it again
            if state.fetch_epoch != epoch:
                state.fetch_offset = state.position
                state.fetch_epoch = epoch
            by_leader, item = fetches, (state, epoch, state.fetch_offset)
        leader = state.leader_in(cluster, version)
        if leader < 0:
            leaderless.append(state)
            continue
        items = by_leader.get(leader)
        if items is None:
            items = by_leader[leader] = []
        items.append(item)
    return fetches, resets, leaderless, retry_due


def start_fetch(list items not None, cluster):
    """For a Fetch of `items` ((state, epoch, fetch_offset) each): ({tp: (fetch_offset, leader epoch)}, the
    request's partitions and offsets with the leader epoch the metadata names (KIP-320); {tp: item}); marks them
    in flight."""
    cdef dict wanted = {}, sent = {}
    cdef long long version = cluster.version
    cdef PartitionState state
    cdef tuple item
    for item in items:
        state = <PartitionState>item[0]
        state.leader_in(cluster, version)
        wanted[state.tp] = (item[2], state.metadata_leader_epoch)
        sent[state.tp] = item
        state.in_flight = True
    return wanted, sent


def changed_partitions(dict wanted not None, dict known not None):
    """The partitions of `wanted` whose (fetch offset, leader epoch) differs from what a fetch session holds."""
    cdef list changed = []
    for tp, position in wanted.items():
        if known.get(tp) != position:
            changed.append(tp)
    return changed


def end_fetch(dict sent not None, touched):
    """A Fetch's answer (or failure) came: its partitions are not in flight any more, and the next loop turn
    looks at them (appended to `touched`)."""
    cdef PartitionState state
    cdef tuple item
    for item in sent.values():
        state = <PartitionState>item[0]
        state.in_flight = False
    touched.extend([item[0] for item in sent.values()])


def sort_response(responses, bint by_topic_id, dict topic_names not None, dict sent not None,
                  dict assignment not None):
    """Walks a FetchResponse's partitions against what was sent: (decode_many()'s parts for the record sets to
    decode, where each goes [(state, epoch, fetch_offset, size)], partition errors [(state, epoch, fetch_offset,
    error_code)], whether a partition left out of the answer never learned its high watermark, the bytes of the
    record sets). Takes the high watermark, last stable and log start offsets; skips partitions sought, paused or
    revoked while the fetch was out and those answered without records.

    A partition's next Fetch goes from where its record set ends, and it leaves at once when the set's batch headers
    say where that is (record_set_end): the broker then reads the next answer while this one is decoded, where
    the next Fetch waited for the decode (a 1 MiB set of 1 KiB records: 0.4-0.5 ms of a 1.7 ms cycle). Otherwise
    (legacy message sets, anything odd, scan_ahead off) the partition stays in flight until complete_fetches() has
    it. Each target ends with the offset its next fetch took from the headers, or -1."""
    cdef set answered = set()
    cdef list parts = [], targets = [], errors = []
    cdef tuple entry
    cdef PartitionState state
    cdef long long epoch
    cdef object topic, records, key
    cdef Py_ssize_t size, nbytes = 0
    cdef int64_t end
    for topic_response in responses:
        topic = topic_names.get(topic_response.topic_id) if by_topic_id else topic_response.topic
        if topic is None:
            continue
        for data in topic_response.partitions:
            key = (topic, data.partition_index)     # equal to the TopicPartition, without its Python-level __new__
            entry = sent.get(key)
            if entry is None:
                continue
            state = <PartitionState>entry[0]
            epoch = entry[1]
            answered.add(key)
            if state.epoch != epoch or assignment.get(key) is not state:
                continue                            # sought, paused or revoked while the fetch was out
            if data.error_code:
                errors.append((state, epoch, entry[2], data.error_code))
                continue
            state.highwater = data.high_watermark
            if data.last_stable_offset >= 0:
                state.last_stable_offset = data.last_stable_offset
            if data.log_start_offset >= 0:
                state.log_start_offset = data.log_start_offset
            records = data.records
            if records is None:
                continue
            size = len(records)
            if not size:
                continue
            parts.append((records, topic, data.partition_index, entry[2], data.aborted_transactions))
            end = set_end_offset(records, entry[2]) if state.scan_ahead else -1
            if end >= 0:
                state.fetch_offset = end
                state.waiting += 1
            else:
                state.in_flight = True
            targets.append((state, epoch, entry[2], size, end))
            nbytes += size
    cdef bint unlearned = False
    for key, entry in sent.items():
        if (<PartitionState>entry[0]).highwater is None and key not in answered:
            unlearned = True
            break
    return parts, targets, errors, unlearned, nbytes


cpdef int64_t set_end_offset(const unsigned char[::1] records, int64_t fetch_offset) except? -2:
    """The offset after the last whole v2 batch of a record set, past fetch_offset, from its batch headers alone;
    -1 when there is none, or anything but v2 batches (records.pyx: record_set_end)."""
    if records.shape[0] == 0:
        return -1
    return record_set_end(<const char*>&records[0], records.shape[0], fetch_offset)


def take_touched(touched, dict visit not None):
    """Moves the partitions of `touched` (a deque that drain() appends to from the user's thread) into `visit`,
    one at a time, as they are taken off its left end."""
    while touched:
        visit[touched.popleft()] = None


def complete_fetches(list targets not None, Py_ssize_t start, list results not None, completed, touched,
                     double retry_at):
    """Queues decode_many()'s results (one per targets[start:]) for the user as CompletedFetches, moving each
    partition's fetch offset on and ending its fetch (appended to `touched`); a partition whose record set could
    not be decoded waits until retry_at. A partition whose next fetch left from the set's headers (sort_response)
    has its fetch offset moved already: when the decoder ends elsewhere (an error), what that fetch brings is
    not what follows, and the partition is listed in `disagreed` with scan_ahead off (the caller makes its fetched
    data stale). Returns (fetches queued, records in them, bytes of their record sets, bytes of all the record
    sets decoded, disagreed [(state, epoch)])."""
    cdef Py_ssize_t i, count, queued = 0, records = 0, nbytes = 0, decoded_bytes = 0, size
    cdef tuple target, result
    cdef PartitionState state
    cdef list decoded
    cdef object next_offset, error, fetch_offset, released
    cdef list disagreed = []
    for i in range(len(results)):
        target = <tuple>targets[start + i]
        result = <tuple>results[i]
        state = <PartitionState>target[0]
        fetch_offset = target[2]
        size = target[3]
        decoded = <list>result[0]
        next_offset = result[1]
        error = result[2]
        released = target[4]
        if released < 0:
            state.fetch_offset = next_offset
            state.in_flight = False
            if error is None:
                state.scan_ahead = True
        else:
            state.waiting -= 1
            if error is not None or next_offset != released:
                state.scan_ahead = False
                disagreed.append((state, target[1]))
        touched.append(state)
        decoded_bytes += size
        # A response of control batches or aborted records only still moves the position past them (drain()
        # does that for an empty CompletedFetch); else later fetches would not follow on.
        if decoded or error is not None or next_offset != fetch_offset:
            count = len(decoded)
            completed.append(CompletedFetch(state, target[1], fetch_offset, decoded, next_offset, error,
                                            <double>size / count if count else 0.0, 0, size))
            state.queued += 1
            queued += 1
            records += count
            nbytes += size
            if error is not None:
                state.retry_at = retry_at           # do not spin on a batch that cannot be read
    return queued, records, nbytes, decoded_bytes, disagreed
