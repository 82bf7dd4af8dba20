# cython: language_level=3
"""kafka-python's KafkaProducer.send(), compiled, for a producer that does nothing to a record before the
accumulator (no serializers, no custom partitioner, no transaction): fastmq.kafka.compat.KafkaProducer takes
KafkaPythonSend(...).send as its send().

Why compiled: kafka-python's send() checks what fastmq's accumulator does not (headers given as a list, a key or a
value, the size against max_request_size) and names errors its own way. As a Python method over the accumulator's
send it was two Python frames a record, and the compat producer spent 501 ns of CPU a 100 B record where the native
one, whose send() is the accumulator's compiled send_record, spent 217 (Apache Kafka). Here the checks are C and
the record goes to the accumulator by a C call (its _send_record, which send_record is). KafkaProducer.send
(Python) remains the way for everything else, with the same checks and errors.
"""
cimport cython

from fastmq._native.accumulator cimport RecordAccumulator

from fastmq.kafka.errors import MessageSizeTooLargeError


cpdef int check_headers(object headers) except -1:
    """kafka-python's first check: headers are None or a list."""
    if headers is not None and not isinstance(headers, list):
        raise TypeError("headers must be list-type")
    return 0


cpdef int raise_headers_error(object headers) except -1:
    """For a TypeError or ValueError of the accumulator: kafka-python's TypeError when the headers are not all
    (str, bytes) tuples (else nothing: the caller re-raises the accumulator's)."""
    for item in headers or ():
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], bytes)):
            raise TypeError("All headers items must be (str, bytes) tuples") from None
    return 0


@cython.final
cdef class KafkaPythonSend:
    """send(topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None): kafka-python's checks,
    then the accumulator's send_record (which fetches metadata for a topic it does not know)."""

    cdef RecordAccumulator accumulator
    cdef Py_ssize_t max_payload         # max_request_size less kafka-python's estimate of a record's overhead
    cdef Py_ssize_t record_overhead

    def __init__(self, RecordAccumulator accumulator not None, Py_ssize_t max_request_size,
                 Py_ssize_t record_overhead):
        self.accumulator = accumulator
        self.max_payload = max_request_size - record_overhead
        self.record_overhead = record_overhead

    def send(self, str topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        check_headers(headers)
        self.check_size(key, value)
        try:
            return self.accumulator._send_record(topic, value, key, headers, partition, timestamp_ms)
        except (TypeError, ValueError):
            raise_headers_error(headers)
            raise

    cpdef int check_size(self, object key, object value) except -1:
        """kafka-python's checks of a serialized record: a key or a value, and their size against
        max_request_size."""
        cdef Py_ssize_t size
        if value is None:
            if key is None:
                raise ValueError("Need at least one: key or value")
            size = len(key)
        else:
            size = len(value) if key is None else len(value) + len(key)
        if size > self.max_payload:
            raise MessageSizeTooLargeError(
                f"The message is {size + self.record_overhead} bytes when serialized which is larger than the "
                "maximum request size you have configured with the max_request_size configuration")
        return 0
