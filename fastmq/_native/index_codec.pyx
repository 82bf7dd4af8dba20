# cython: language_level=3
"""IndexFile entries of the RocketMQ 4.x store: putting a key's entry and selecting the entries of a key.

IndexFile: header (40 bytes, big-endian) [beginTimestamp i64][endTimestamp i64][beginPhyOffset i64]
[endPhyOffset i64][hashSlotCount i32][indexCount i32], then hashSlotNum slots of i32 (the newest entry number for
that slot, 0 = empty), then indexNum entries of [keyHash i32][phyOffset i64][timeDiff i32 seconds since
beginTimestamp][prevIndex i32]. Entry 0 is never used, so indexCount starts at 1. keyHash = abs(Java
String.hashCode("topic#key")), 0 for Integer.MIN_VALUE, exactly as RocketMQ computes it so that either side can
read the file.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t

from fastmq._native.buffer cimport load_i32be, load_i64be, store_i32be, store_i64be
from fastmq._native.store_codec cimport java_string_hash

from fastmq.errors import CorruptDataError

cdef enum:
    INT32_MAX = 0x7FFFFFFF
    INDEX_HEADER_SIZE = 40
    INDEX_HASH_SLOT_SIZE = 4
    INDEX_ENTRY_SIZE = 20

# Python-visible names for the format constants.
INDEX_HEADER_LENGTH = INDEX_HEADER_SIZE
INDEX_SLOT_LENGTH = INDEX_HASH_SLOT_SIZE
INDEX_ENTRY_LENGTH = INDEX_ENTRY_SIZE


def index_key_hash(str key) -> int:
    """IndexFile's hash of "topic#key": abs(hashCode), with Integer.MIN_VALUE mapped to 0 as RocketMQ does."""
    cdef int32_t h = java_string_hash(key)
    if h == -2147483648:
        return 0
    return -h if h < 0 else h


cdef enum:
    HEADER_BEGIN_TIMESTAMP = 0
    HEADER_END_TIMESTAMP = 8
    HEADER_BEGIN_PHY_OFFSET = 16
    HEADER_END_PHY_OFFSET = 24
    HEADER_HASH_SLOT_COUNT = 32
    HEADER_INDEX_COUNT = 36


cdef int check_index_geometry(const Py_buffer* view, int32_t slot_num, int32_t index_num) except -1:
    if slot_num <= 0 or index_num <= 1:
        raise ValueError("an index file needs at least one hash slot and two entries")
    if view.len < INDEX_HEADER_SIZE + <int64_t>slot_num * INDEX_HASH_SLOT_SIZE + <int64_t>index_num * INDEX_ENTRY_SIZE:
        raise CorruptDataError(f"index file of {view.len} bytes is smaller than {slot_num} slots and "
                               f"{index_num} entries need")
    return 0


cdef inline char* index_entry(const char* p, int32_t slot_num, int32_t number) noexcept:
    return <char*>p + INDEX_HEADER_SIZE + <Py_ssize_t>slot_num * INDEX_HASH_SLOT_SIZE + <Py_ssize_t>number * INDEX_ENTRY_SIZE


def index_put(buf, int32_t slot_num, int32_t index_num, int32_t key_hash, int64_t phy_offset,
              int64_t store_timestamp) -> bool:
    """Add one key to an index file (RocketMQ's IndexFile.putKey); False when the file is full."""
    cdef Py_buffer view
    cdef char* p
    cdef int32_t count
    cdef int32_t slot_value
    cdef int64_t begin_timestamp
    cdef int64_t time_diff
    cdef char* slot
    cdef char* entry
    if key_hash < 0:
        raise ValueError("index key hashes are non-negative (see index_key_hash)")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        check_index_geometry(&view, slot_num, index_num)
        p = <char*>view.buf
        count = load_i32be(p + HEADER_INDEX_COUNT)
        if count <= 0:
            count = 1
        if count >= index_num:
            return False
        slot = p + INDEX_HEADER_SIZE + (key_hash % slot_num) * INDEX_HASH_SLOT_SIZE
        slot_value = load_i32be(slot)
        if slot_value <= 0 or slot_value >= count:
            slot_value = 0
        begin_timestamp = load_i64be(p + HEADER_BEGIN_TIMESTAMP)
        time_diff = (store_timestamp - begin_timestamp) // 1000 if store_timestamp >= begin_timestamp else 0
        if begin_timestamp <= 0:
            time_diff = 0
        elif time_diff > INT32_MAX:
            time_diff = INT32_MAX
        entry = index_entry(p, slot_num, count)
        store_i32be(entry, key_hash)
        store_i64be(entry + 4, phy_offset)
        store_i32be(entry + 12, <int32_t>time_diff)
        store_i32be(entry + 16, slot_value)
        store_i32be(slot, count)
        if count <= 1:
            store_i64be(p + HEADER_BEGIN_PHY_OFFSET, phy_offset)
            store_i64be(p + HEADER_BEGIN_TIMESTAMP, store_timestamp)
        if slot_value == 0:
            store_i32be(p + HEADER_HASH_SLOT_COUNT, load_i32be(p + HEADER_HASH_SLOT_COUNT) + 1)
        store_i64be(p + HEADER_END_PHY_OFFSET, phy_offset)
        store_i64be(p + HEADER_END_TIMESTAMP, store_timestamp)
        store_i32be(p + HEADER_INDEX_COUNT, count + 1)
        return True
    finally:
        PyBuffer_Release(&view)


def index_select(buf, int32_t slot_num, int32_t index_num, int32_t key_hash, Py_ssize_t max_num, int64_t begin,
                 int64_t end) -> list:
    """CommitLog offsets of the entries with this key hash stored between begin and end (ms), newest first.

    Follows the slot's chain only towards older entries, so a corrupt file ends the walk instead of looping.
    """
    cdef Py_buffer view
    cdef const char* p
    cdef const char* entry
    cdef int32_t count
    cdef int32_t current
    cdef int32_t previous
    cdef int64_t begin_timestamp
    cdef int64_t time_read
    cdef int32_t time_diff
    cdef list found = []
    if key_hash < 0:
        raise ValueError("index key hashes are non-negative (see index_key_hash)")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        check_index_geometry(&view, slot_num, index_num)
        p = <const char*>view.buf
        count = load_i32be(p + HEADER_INDEX_COUNT)
        if count > index_num:
            count = index_num
        begin_timestamp = load_i64be(p + HEADER_BEGIN_TIMESTAMP)
        current = load_i32be(p + INDEX_HEADER_SIZE + (key_hash % slot_num) * INDEX_HASH_SLOT_SIZE)
        if count <= 1 or current <= 0 or current >= count:
            return found
        while len(found) < max_num:
            entry = index_entry(p, slot_num, current)
            time_diff = load_i32be(entry + 12)
            if time_diff < 0:
                break
            time_read = begin_timestamp + <int64_t>time_diff * 1000
            if load_i32be(entry) == key_hash and begin <= time_read <= end:
                found.append(load_i64be(entry + 4))
            previous = load_i32be(entry + 16)
            if previous <= 0 or previous >= current or time_read < begin:
                break
            current = previous
        return found
    finally:
        PyBuffer_Release(&view)
