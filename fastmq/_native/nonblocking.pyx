# cython: language_level=3
"""System calls on non-blocking descriptors, made without releasing the GIL: the I/O loop's reads, writes, eventfd
signals and zero-timeout epoll polls.

Why: Python's own wrappers (socket.sendmsg/recv_into, select.epoll.poll, os.eventfd_read/write) release the GIL
around every call. While another thread runs Python code (a producer's user thread encoding records), the thread
that let the GIL go waits for it again until the other one is made to drop it: up to sys.getswitchinterval(),
5 ms. An I/O thread that released the GIL for each write, read and poll of one produce request waited up to 5 ms
several times per request, and that, not CPU, bounded a producer's requests per second. These calls never block
(the descriptors are non-blocking, the poll has no timeout), so they hold the GIL for the microseconds they take;
only the loop's waiting poll still releases it. Errors are raised as OSError subclasses by errno, as the socket
module raises them (BlockingIOError for EAGAIN).

"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.exc cimport PyErr_SetFromErrno
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset


cdef extern from "<sys/uio.h>":
    struct iovec:
        void* iov_base
        size_t iov_len

cdef extern from "<sys/socket.h>":
    struct msghdr:
        void* msg_name
        unsigned int msg_namelen
        iovec* msg_iov
        size_t msg_iovlen
        void* msg_control
        size_t msg_controllen
        int msg_flags
    ssize_t sendmsg(int fd, const msghdr* message, int flags)
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    int MSG_DONTWAIT
    int MSG_NOSIGNAL

cdef extern from "<sys/epoll.h>":
    union epoll_data_t:
        int fd
        uint64_t u64
    struct epoll_event:
        unsigned int events
        epoll_data_t data
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout)

cdef extern from "<unistd.h>":
    ssize_t read(int fd, void* buf, size_t n)
    ssize_t write(int fd, const void* buf, size_t n)


cdef enum:
    MAX_PARTS = 1024            # iovecs per sendmsg (Linux's IOV_MAX)
    MAX_EVENTS = 1024           # events per poll; the rest come with the next one


def send_parts(int fd, parts) -> int:
    """sendmsg() of the first MAX_PARTS buffers of `parts` (a sequence of bytes-like objects); returns the bytes
    sent."""
    cdef Py_ssize_t count = min(len(parts), MAX_PARTS), taken = 0, i
    cdef Py_buffer* views = <Py_buffer*>malloc(max(count, 1) * sizeof(Py_buffer))
    cdef iovec* vectors = <iovec*>malloc(max(count, 1) * sizeof(iovec))
    cdef msghdr message
    cdef ssize_t sent
    if views == NULL or vectors == NULL:
        free(views)
        free(vectors)
        raise MemoryError()
    try:
        for i in range(count):
            PyObject_GetBuffer(parts[i], &views[i], PyBUF_SIMPLE)
            taken += 1
            vectors[i].iov_base = views[i].buf
            vectors[i].iov_len = <size_t>views[i].len
        memset(&message, 0, sizeof(message))
        message.msg_iov = vectors
        message.msg_iovlen = <size_t>count
        sent = sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL)
        if sent < 0:
            PyErr_SetFromErrno(OSError)
        return sent
    finally:
        for i in range(taken):
            PyBuffer_Release(&views[i])
        free(views)
        free(vectors)


def recv_into(int fd, buffer) -> int:
    """recv() into a writable buffer, as much as it holds; returns the bytes received (0: the peer closed)."""
    cdef Py_buffer view
    cdef ssize_t received
    PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
    try:
        received = recv(fd, view.buf, <size_t>view.len, MSG_DONTWAIT)
        if received < 0:
            PyErr_SetFromErrno(OSError)
        return received
    finally:
        PyBuffer_Release(&view)


def poll_now(int epfd) -> list:
    """epoll_wait() with no timeout: [(fd, events)] of the descriptors ready now, as select.epoll.poll(0)."""
    cdef epoll_event events[MAX_EVENTS]
    cdef int ready = epoll_wait(epfd, events, MAX_EVENTS, 0), i
    if ready < 0:
        PyErr_SetFromErrno(OSError)
    return [(events[i].data.fd, events[i].events) for i in range(ready)]


def eventfd_signal(int fd) -> None:
    """Adds 1 to an eventfd's counter (a non-blocking eventfd: at one write per sleep it cannot overflow)."""
    cdef uint64_t one = 1
    if write(fd, &one, sizeof(one)) < 0:
        PyErr_SetFromErrno(OSError)


def eventfd_reset(int fd) -> None:
    """Reads (and so zeroes) a non-blocking eventfd's counter; BlockingIOError when it was zero."""
    cdef uint64_t value
    if read(fd, &value, sizeof(value)) < 0:
        PyErr_SetFromErrno(OSError)

