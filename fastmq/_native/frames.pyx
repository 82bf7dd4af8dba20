# cython: language_level=3
"""Incremental frame splitters for the four stream protocols fastmq speaks.

Feed bytes (feed(), or writable() + recv_into + commit()) and take whole frames (next_frame(), or iterate).
All integers are big-endian.

Kafka        [size i32][size bytes]
             next_frame() -> the `size` bytes. size < 0 is a ProtocolError; max_frame_size bounds `size`
             (default 100 MiB, the broker's socket.request.max.bytes).
RocketMQ     [total i32][(serializeType << 24) | headerLen i32][header: headerLen bytes][body]
             `total` counts everything after itself (4 + headerLen + len(body)).
             next_frame() -> the `total` bytes. total < 4 or headerLen > total - 4 is a ProtocolError;
             serializeType is not checked (clients that ignore it exist; the remoting codec decides).
             max_frame_size bounds `total` (default 16 MiB, RocketMQ's own limit).
NSQ          [size u32][frame type u32][data]   (frames from nsqd to a client)
             `size` counts the type and the data. next_frame() -> (frame_type, data), types 0 response,
             1 error, 2 message; any other type, or size < 4, is a ProtocolError. max_frame_size bounds
             `size` (default 16 MiB: nsqd's --max-msg-size defaults to 1 MiB, servers may raise it).
TubeMQ       [token u32 = 0xFF7FF4FE][serialNo i32][listSize i32] then listSize x ([len i32][len bytes])
             The blocks are pieces of one payload cut at 8192 bytes regardless of content (every block
             full but the last); next_frame() -> (serial_no, the blocks joined).
             Accepted, the lenient union of what real peers send and what their decoders take:
               listSize 1..3584: Java's decoder takes 0..3584 (28 MiB), but 0 has no block to end the
                 frame, so Java would read the next frame's bytes as a block; no encoder emits it.
                 The C++ client's own cap of 1024 is not applied: Java peers send up to 3584.
               block len 0..8192: Java's limit; its encoder sends one empty block for an empty payload
                 (the C++ client would reject that one).
             A wrong token is a ProtocolError. max_frame_size bounds the joined payload (default 3584 x 8192
             bytes, Java's most); it is checked at each block header, before that block's bytes arrive.
             encode_tubemq_frame() writes this format the way the Java encoder does.

What a splitter guarantees:
- Every length is checked against max_frame_size from the header alone, before anything is allocated for
  the frame: FrameTooLargeError. So max_frame_size is also the most that one header can make a splitter
  allocate (a valid header of a large frame does allocate the whole frame at once, see below).
- Frames come out as bytes copied once out of the receive buffer, never sliced twice. A frame still
  missing IN_PLACE_MIN_MISSING bytes or more when its header is validated gets its bytes object allocated
  at once; what is buffered is copied in, writable() then hands out the rest of that object, so recv_into
  fills it in place, and next_frame() returns it when full. Smaller frames wait in the shared buffer,
  which may compact or grow under them. TubeMQ frames are always joined from the shared buffer: their
  size is only known once the last block header has arrived.
- Errors are sticky: after a ProtocolError (or subclass) every later feed / writable / commit /
  next_frame raises the same class again. The stream has lost its framing; close the connection.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, uint32_t
from libc.errno cimport EAGAIN, EINTR, errno
from libc.string cimport memcpy

from fastmq._native.buffer cimport load_i32be, load_u32be, store_i32be

from fastmq.errors import ConfigurationError, FrameTooLargeError, ProtocolError

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char* mem, Py_ssize_t size, int flags)
    int PyBUF_WRITE

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd* fds, unsigned long nfds, int timeout)
    enum: POLLIN

cdef extern from "<sys/socket.h>" nogil:
    ssize_t send(int fd, const void* buf, size_t n, int flags)
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    enum: MSG_NOSIGNAL
    enum: MSG_DONTWAIT

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clock_id, timespec* tp)
    enum: CLOCK_MONOTONIC


cdef inline double _monotonic() noexcept nogil:
    # The clock of Python's time.monotonic() on Linux, so deadlines computed there compare here.
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec * 1e-9


cdef class FrameSplitter:
    """The buffering shared by every protocol's splitter; subclasses only say how long the head frame is.

    Not thread-safe: one splitter belongs to one connection and is used by one thread at a time.
    """

    def __cinit__(self, *args, **kwargs):
        if type(self) is FrameSplitter:
            raise TypeError("FrameSplitter is abstract; use the splitter of a protocol")
        self._buf = ReadBuffer()
        self._frame = None
        self._frame_filled = 0
        self._failure = None

    cdef int _setup(self, Py_ssize_t max_frame_size, Py_ssize_t header_size, Py_ssize_t prefix_size) except -1:
        if max_frame_size < 0:
            raise ConfigurationError(f"max_frame_size must be >= 0, not {max_frame_size}")
        self._max_frame_size = max_frame_size
        self._header_size = header_size
        self._prefix_size = prefix_size
        return 0

    cdef int _fail(self, type error, str message) except -1:
        self._failure = error(f"{message}; close the connection")
        raise self._failure

    cdef int _raise_failure(self) except -1:
        # A fresh exception each time: re-raising one instance would grow its traceback without end.
        raise type(self._failure)(f"stream already broken: {self._failure}") from self._failure

    cdef Py_ssize_t _measure(self, const char* head, Py_ssize_t available) except -2:
        # Validates the header at `head` (at least _header_size bytes buffered) and returns the frame's
        # whole wire size, or -1 when more bytes are needed to know it. Raises through _fail.
        raise NotImplementedError

    cdef object _build(self, const char* head, Py_ssize_t size):
        # The frame object for the `size` buffered bytes at `head` (a whole frame, already measured).
        return self._wrap(PyBytes_FromStringAndSize(head + self._prefix_size, size - self._prefix_size))

    cdef object _wrap(self, bytes body):
        # What next_frame() returns for a frame whose body is `body`.
        return body

    cdef int _start_in_place(self, const char* head, Py_ssize_t available, Py_ssize_t size) except -1:
        # Everything buffered belongs to this frame (it is incomplete), so the buffer empties.
        cdef Py_ssize_t have = available - self._prefix_size
        cdef bytes frame = PyBytes_FromStringAndSize(NULL, size - self._prefix_size)
        memcpy(PyBytes_AS_STRING(frame), head + self._prefix_size, have)
        self._buf.consume(available)
        self._frame = frame
        self._frame_filled = have
        return 0

    cdef int _take(self, const char* data, Py_ssize_t n) except -1:
        cdef Py_ssize_t missing = self._in_place_missing()
        if missing:
            if missing > n:
                missing = n
            memcpy(PyBytes_AS_STRING(self._frame) + self._frame_filled, data, missing)
            self._frame_filled += missing
            data += missing
            n -= missing
        if n:
            self._buf.append(data, n)
        return 0

    cdef Py_ssize_t _whole_size(self) except -2:
        # The head frame's size when it is whole in the buffer, WHOLE_IN_PLACE when the frame received in place
        # is whole, -1 when no frame is whole yet; starts receiving a large frame in place once its size is known.
        cdef Py_ssize_t available, size
        self._check()
        if self._frame is not None:
            return WHOLE_IN_PLACE if self._frame_filled >= len(self._frame) else -1
        available = self._buf.available()
        if available < self._header_size:
            return -1
        size = self._measure(self._buf.head(), available)
        if size < 0:
            return -1
        if size <= available:
            return size
        if self._prefix_size >= 0 and size - available >= IN_PLACE_MIN_MISSING:
            self._start_in_place(self._buf.head(), available, size)
        return -1

    cdef object _next(self):
        cdef Py_ssize_t size = self._whole_size()
        cdef bytes frame
        if size < 0:
            return None
        if size == WHOLE_IN_PLACE:
            frame = self._frame
            self._frame = None
            self._frame_filled = 0
            return self._wrap(frame)
        result = self._build(self._buf.head(), size)
        self._buf.consume(size)
        return result

    def feed(self, data) -> None:
        """Append received bytes (any contiguous bytes-like object)."""
        cdef Py_buffer view
        self._check()
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self._take(<const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    def writable(self, Py_ssize_t min_size=65536) -> memoryview:
        """Free space for sock.recv_into(view); follow with commit(n). Valid only until the next call:
        the view does not keep its memory alive and, in place, points into a frame about to be returned.

        While a large frame is received in place the view is the rest of that frame, possibly shorter
        than min_size; otherwise it is at least min_size bytes of the shared buffer.
        """
        cdef Py_ssize_t missing
        self._check()
        missing = self._in_place_missing()
        if missing:
            return PyMemoryView_FromMemory(PyBytes_AS_STRING(self._frame) + self._frame_filled, missing,
                                           PyBUF_WRITE)
        return self._buf.writable(min_size)

    def commit(self, Py_ssize_t n) -> None:
        """Record that n bytes were received into the view from the last writable()."""
        cdef Py_ssize_t missing
        self._check()
        missing = self._in_place_missing()
        if missing:
            if n < 0 or n > missing:
                raise ValueError(f"commit({n}) exceeds the writable region of {missing} bytes")
            self._frame_filled += n
        else:
            self._buf.commit(n)

    def round_trip(self, int fd, data, lock, double deadline, Py_ssize_t recv_size=65536) -> tuple:
        """Write `data` to the non-blocking socket fd, then receive into this splitter until a frame is whole.

        One call for a thread that writes its request and waits for the answer itself (Connection.call_blocking):
        the writing and the waiting run without the GIL, and no Python-level call is made per poll or recv.
        The write never waits: when the socket takes all of `data`, lock.release() is called (the writers' lock,
        held by the caller while it writes) and the receiving starts; otherwise the call returns at once with
        the lock still held. Receiving stops once a whole frame is buffered (take it with next_frame()), when the
        peer closes or fails, or at `deadline` (time.monotonic() seconds).

        Returns (sent, received, error): received is -1 when the socket did not take all of data (the lock is
        still held; error is then the errno of a failed send, or 0 when the socket was full), else the bytes
        received, with error 0, -1 when the peer closed the stream, or the errno of a failed recv or poll.
        Raises the splitter's ProtocolError for a bad frame header (after the lock was released).
        """
        cdef Py_buffer view
        cdef Py_ssize_t size, sent = 0, received = 0, room
        cdef ssize_t n
        cdef int error = 0
        cdef double remaining
        cdef bint in_place
        cdef char* target
        cdef pollfd waiter
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            size = view.len
            with nogil:
                while sent < size:
                    n = send(fd, <const char*>view.buf + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT)
                    if n >= 0:
                        sent += n
                    elif errno != EINTR:
                        if errno != EAGAIN:     # (EWOULDBLOCK is EAGAIN on Linux)
                            error = errno
                        break
        finally:
            PyBuffer_Release(&view)
        if sent < size:
            return sent, -1, error
        lock.release()
        waiter.fd = fd
        waiter.events = POLLIN
        while self._whole_size() < 0:     # a broken stream raises here, after the lock's release
            in_place = self._in_place_missing() != 0
            if in_place:
                target = PyBytes_AS_STRING(self._frame) + self._frame_filled
                room = self._in_place_missing()
            else:
                self._buf._make_room(recv_size)
                target = self._buf._data + self._buf._end
                room = self._buf._capacity - self._buf._end
            with nogil:
                while True:
                    n = recv(fd, target, room, MSG_DONTWAIT)
                    if n > 0:
                        break
                    if n == 0:
                        error = -1
                        break
                    if errno == EINTR:
                        continue
                    if errno != EAGAIN:     # (EWOULDBLOCK is EAGAIN on Linux)
                        error = errno
                        break
                    remaining = deadline - _monotonic()
                    if remaining <= 0:
                        break
                    if poll(&waiter, 1, <int>(remaining * 1000) + 1) < 0 and errno != EINTR:
                        error = errno
                        break
            if n <= 0:
                break
            received += n
            if in_place:
                self._frame_filled += n
            else:
                self._buf._end += n
        return sent, received, error

    def next_frame(self):
        """One whole frame (see the module docstring for its shape per protocol), or None if none is whole."""
        return self._next()

    def __iter__(self):
        """The splitter itself: yields whole frames until none is whole; iterate again after more bytes."""
        return self

    def __next__(self):
        frame = self._next()
        if frame is None:
            raise StopIteration
        return frame

    def take_buffered(self) -> bytes:
        """Remove and return the bytes received but not yet returned in a frame (the splitter is empty after).

        For a stream whose layer below the frames changes here (an in-place upgrade to compression): those
        bytes were sent through the new layer and must pass through it before they are framed. Raises
        ValueError while a large frame is received in place: its header is consumed, so the stream is not
        at a frame boundary.
        """
        cdef Py_ssize_t held
        cdef bytes data
        self._check()
        if self._frame is not None:
            raise ValueError("a frame is being received in place: the stream is not at a frame boundary")
        held = self._buf.available()
        data = PyBytes_FromStringAndSize(self._buf.head(), held)
        self._buf.consume(held)
        self._forget_head()
        return data

    cdef void _forget_head(self) noexcept:
        # Drops what _measure remembered about the frame at the head (its bytes were taken away).
        pass

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame (headers included)."""
        cdef Py_ssize_t held = self._buf.available()
        if self._frame is not None:
            held += self._prefix_size + self._frame_filled
        return held

    @property
    def max_frame_size(self) -> int:
        return self._max_frame_size


@cython.final
cdef class KafkaFrameSplitter(FrameSplitter):
    """Kafka requests or responses: [size i32][size bytes]; frames are the `size` bytes."""

    def __init__(self, Py_ssize_t max_frame_size=100 * 1024 * 1024):
        self._setup(max_frame_size, KAFKA_PREFIX_SIZE, KAFKA_PREFIX_SIZE)

    cdef Py_ssize_t _measure(self, const char* head, Py_ssize_t available) except -2:
        cdef int32_t size = load_i32be(head)
        if size < 0:
            self._fail(ProtocolError, f"Kafka frame with negative size {size}")
        if size > self._max_frame_size:
            self._fail(FrameTooLargeError, f"Kafka frame of {size} bytes exceeds max_frame_size "
                                           f"{self._max_frame_size} (raise it if the peer is right)")
        return KAFKA_PREFIX_SIZE + size


@cython.final
cdef class RocketMQFrameSplitter(FrameSplitter):
    """RocketMQ remoting commands; frames are the `total` bytes after the length prefix."""

    def __init__(self, Py_ssize_t max_frame_size=16 * 1024 * 1024):
        self._setup(max_frame_size, ROCKETMQ_HEADER_SIZE, ROCKETMQ_PREFIX_SIZE)

    cdef Py_ssize_t _measure(self, const char* head, Py_ssize_t available) except -2:
        cdef int32_t total = load_i32be(head)
        cdef uint32_t header_len = load_u32be(head + 4) & ROCKETMQ_HEADER_LEN_MASK
        if total < 4:
            self._fail(ProtocolError, f"RocketMQ frame with total length {total}, "
                                      f"below the 4 bytes of its header-length word")
        if total > self._max_frame_size:
            self._fail(FrameTooLargeError, f"RocketMQ frame of {total} bytes exceeds max_frame_size "
                                           f"{self._max_frame_size} (raise it if the peer is right)")
        if header_len > <uint32_t>(total - 4):
            self._fail(ProtocolError, f"RocketMQ header length {header_len} exceeds "
                                      f"the frame's {total - 4} bytes")
        return ROCKETMQ_PREFIX_SIZE + total


@cython.final
cdef class NSQFrameSplitter(FrameSplitter):
    """Frames from nsqd: next_frame() returns (frame_type, data)."""

    def __init__(self, Py_ssize_t max_frame_size=16 * 1024 * 1024):
        self._setup(max_frame_size, NSQ_HEADER_SIZE, NSQ_HEADER_SIZE)

    cdef Py_ssize_t _measure(self, const char* head, Py_ssize_t available) except -2:
        cdef uint32_t size = load_u32be(head)
        cdef uint32_t frame_type = load_u32be(head + 4)
        if size < NSQ_TYPE_SIZE:
            self._fail(ProtocolError, f"NSQ frame size {size} is smaller than its 4-byte frame type")
        if <Py_ssize_t>size > self._max_frame_size:
            self._fail(FrameTooLargeError, f"NSQ frame of {size} bytes exceeds max_frame_size "
                                           f"{self._max_frame_size} (raise it if nsqd's max-msg-size is larger)")
        if frame_type > NSQ_FRAME_MESSAGE:
            self._fail(ProtocolError, f"unknown NSQ frame type {frame_type} (0 response, 1 error, 2 message)")
        self._frame_type = <int32_t>frame_type
        return NSQ_HEADER_SIZE - NSQ_TYPE_SIZE + <Py_ssize_t>size

    cdef object _wrap(self, bytes body):
        return (self._frame_type, body)


@cython.final
cdef class TubeMQFrameSplitter(FrameSplitter):
    """TubeMQ RPC frames: next_frame() returns (serial_no, payload) with the blocks joined."""

    def __init__(self, Py_ssize_t max_frame_size=TUBEMQ_MAX_LIST_SIZE * TUBEMQ_BLOCK_SIZE):
        self._setup(max_frame_size, TUBEMQ_HEADER_SIZE, -1)
        self._list_size = -1

    cdef Py_ssize_t _measure(self, const char* head, Py_ssize_t available) except -2:
        # Resumes where the last call stopped, so a frame arriving in many pieces is scanned once.
        cdef int32_t list_size, block_len
        if self._list_size < 0:
            if load_i32be(head) != TUBEMQ_TOKEN:
                self._fail(ProtocolError, f"TubeMQ frame token 0x{load_u32be(head):08X}, "
                                          f"expected 0xFF7FF4FE: the peer does not speak TubeMQ RPC")
            list_size = load_i32be(head + 8)
            if list_size < 1 or list_size > TUBEMQ_MAX_LIST_SIZE:
                self._fail(ProtocolError, f"TubeMQ frame with {list_size} blocks, "
                                          f"outside 1..{TUBEMQ_MAX_LIST_SIZE}")
            self._serial_no = load_i32be(head + 4)
            self._list_size = list_size
            self._blocks_seen = 0
            self._scan_offset = TUBEMQ_HEADER_SIZE
            self._payload_size = 0
        while self._blocks_seen < self._list_size:
            if available - self._scan_offset < TUBEMQ_BLOCK_HEADER_SIZE:
                return -1
            block_len = load_i32be(head + self._scan_offset)
            if block_len < 0 or block_len > TUBEMQ_BLOCK_SIZE:
                self._fail(ProtocolError, f"TubeMQ block of {block_len} bytes, outside 0..{TUBEMQ_BLOCK_SIZE}")
            if self._payload_size + block_len > self._max_frame_size:
                self._fail(FrameTooLargeError, f"TubeMQ payload of more than {self._payload_size + block_len} "
                                               f"bytes exceeds max_frame_size {self._max_frame_size}")
            if available - self._scan_offset - TUBEMQ_BLOCK_HEADER_SIZE < block_len:
                return -1
            self._scan_offset += TUBEMQ_BLOCK_HEADER_SIZE + block_len
            self._payload_size += block_len
            self._blocks_seen += 1
        return self._scan_offset

    cdef void _forget_head(self) noexcept:
        self._list_size = -1

    cdef object _build(self, const char* head, Py_ssize_t size):
        cdef bytes payload = PyBytes_FromStringAndSize(NULL, self._payload_size)
        cdef char* out = PyBytes_AS_STRING(payload)
        cdef const char* block = head + TUBEMQ_HEADER_SIZE
        cdef int32_t block_len, i
        for i in range(self._list_size):
            block_len = load_i32be(block)
            memcpy(out, block + TUBEMQ_BLOCK_HEADER_SIZE, block_len)
            out += block_len
            block += TUBEMQ_BLOCK_HEADER_SIZE + block_len
        self._list_size = -1
        return (self._serial_no, payload)


def encode_tubemq_frame(int32_t serial_no, payload) -> bytes:
    """One TubeMQ RPC frame around `payload` (bytes-like), cut into 8192-byte blocks, the last one partial.

    An empty payload travels as one empty block, as the Java encoder sends it.
    """
    cdef Py_buffer view
    cdef Py_ssize_t n, blocks, block_len
    cdef const char* src
    cdef char* out
    cdef bytes frame
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        n = view.len
        src = <const char*>view.buf
        blocks = (n + TUBEMQ_BLOCK_SIZE - 1) // TUBEMQ_BLOCK_SIZE if n else 1
        if blocks > TUBEMQ_MAX_LIST_SIZE:
            raise FrameTooLargeError(f"TubeMQ payload of {n} bytes needs {blocks} blocks; servers "
                                     f"accept at most {TUBEMQ_MAX_LIST_SIZE} x {TUBEMQ_BLOCK_SIZE} bytes")
        frame = PyBytes_FromStringAndSize(NULL, TUBEMQ_HEADER_SIZE + blocks * TUBEMQ_BLOCK_HEADER_SIZE + n)
        out = PyBytes_AS_STRING(frame)
        store_i32be(out, TUBEMQ_TOKEN)
        store_i32be(out + 4, serial_no)
        store_i32be(out + 8, <int32_t>blocks)
        out += TUBEMQ_HEADER_SIZE
        while True:
            block_len = n if n < TUBEMQ_BLOCK_SIZE else TUBEMQ_BLOCK_SIZE
            store_i32be(out, <int32_t>block_len)
            memcpy(out + TUBEMQ_BLOCK_HEADER_SIZE, src, block_len)
            out += TUBEMQ_BLOCK_HEADER_SIZE + block_len
            src += block_len
            n -= block_len
            if n == 0:
                break
        return frame
    finally:
        PyBuffer_Release(&view)
