# cython: language_level=3
"""Incremental frame splitters: one shared mechanism (FrameSplitter) and one small hook class per protocol.
The wire formats and the limits each splitter enforces are documented at the top of frames.pyx."""
cimport cython
from libc.stdint cimport int32_t

from fastmq._native.buffer cimport ReadBuffer

cdef enum:
    # A frame still missing at least this many bytes when its header arrives is received straight into
    # its own bytes object: below it, the extra recv() that stops at the frame's end costs more than the
    # copy out of the shared buffer that it saves.
    IN_PLACE_MIN_MISSING = 65536
    WHOLE_IN_PLACE = 0              # _whole_size(): the frame received in place is whole (frames are never empty)

    KAFKA_PREFIX_SIZE = 4                    # [size i32]
    ROCKETMQ_PREFIX_SIZE = 4                 # [total i32]
    ROCKETMQ_HEADER_SIZE = 8                 # [total i32][(serializeType << 24) | headerLen]
    ROCKETMQ_HEADER_LEN_MASK = 0xFFFFFF      # headerLen is the low 24 bits of the second word
    NSQ_HEADER_SIZE = 8                      # [size u32][frame type u32]
    NSQ_TYPE_SIZE = 4                        # the part of `size` taken by the frame type
    NSQ_FRAME_RESPONSE = 0
    NSQ_FRAME_ERROR = 1
    NSQ_FRAME_MESSAGE = 2
    TUBEMQ_TOKEN = -8391426                  # 0xFF7FF4FE read as a signed big-endian i32
    TUBEMQ_HEADER_SIZE = 12                  # [token u32][serialNo i32][listSize i32]
    TUBEMQ_BLOCK_HEADER_SIZE = 4             # [len i32] before each block
    TUBEMQ_BLOCK_SIZE = 8192                 # RPC_MAX_BUFFER_SIZE: the largest block, the size encoders fill
    TUBEMQ_MAX_LIST_SIZE = 3584              # Java's MAX_FRAME_MAX_LIST_SIZE: (20 MiB + 8 MiB) / 8192


cdef class FrameSplitter:
    cdef ReadBuffer _buf                 # received bytes not yet returned as a frame or moved into _frame
    cdef Py_ssize_t _max_frame_size      # largest length a header may announce (what it counts is per protocol)
    cdef Py_ssize_t _header_size         # bytes _measure needs at the head before it can judge the frame
    cdef Py_ssize_t _prefix_size         # wire bytes before the returned body; -1: no contiguous body (TubeMQ)
    cdef object _failure                 # the ProtocolError that broke the stream; every later call raises again
    cdef bytes _frame                    # a large frame being received in place (still private), or None
    cdef Py_ssize_t _frame_filled        # bytes of _frame received so far

    cdef int _setup(self, Py_ssize_t max_frame_size, Py_ssize_t header_size, Py_ssize_t prefix_size) except -1
    cdef int _fail(self, type error, str message) except -1
    cdef int _raise_failure(self) except -1
    cdef Py_ssize_t _measure(self, const char* head, Py_ssize_t available) except -2
    cdef object _build(self, const char* head, Py_ssize_t size)
    cdef object _wrap(self, bytes body)
    cdef int _start_in_place(self, const char* head, Py_ssize_t available, Py_ssize_t size) except -1
    cdef int _take(self, const char* data, Py_ssize_t n) except -1
    cdef object _next(self)
    cdef Py_ssize_t _whole_size(self) except -2
    cdef void _forget_head(self) noexcept

    cdef inline int _check(self) except -1:
        if self._failure is not None:
            self._raise_failure()
        return 0

    cdef inline Py_ssize_t _in_place_missing(self) noexcept:
        # Bytes the in-place frame still needs; 0 when there is none, or it is full and waits for _next.
        if self._frame is None:
            return 0
        return len(self._frame) - self._frame_filled


@cython.final
cdef class KafkaFrameSplitter(FrameSplitter):
    pass


@cython.final
cdef class RocketMQFrameSplitter(FrameSplitter):
    pass


@cython.final
cdef class NSQFrameSplitter(FrameSplitter):
    cdef int32_t _frame_type             # type of the frame at the head, read by _measure for _wrap


@cython.final
cdef class TubeMQFrameSplitter(FrameSplitter):
    cdef int32_t _list_size              # blocks of the frame at the head; -1 until its header is read
    cdef int32_t _serial_no              # serialNo of the frame at the head
    cdef int32_t _blocks_seen            # blocks of it already buffered whole
    cdef Py_ssize_t _scan_offset         # where the next block header starts, from the frame's first byte
    cdef Py_ssize_t _payload_size        # sum of the lengths of the blocks seen
