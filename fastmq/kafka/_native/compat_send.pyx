# cython: language_level=3
"""kafka-python's KafkaProducer.send(), compiled, for a producer that does nothing to a record before the
accumulator (no serializers, no custom partitioner, no transaction): fastmq.kafka.compat.KafkaProducer takes
KafkaPythonSend(...).send as its send().

Why compiled: kafka-python's send() checks what fastmq's accumulator does not (headers given as a list, a key or a
value, the size against max_request_size) and names errors its own way. As a Python method over the accumulator's
send it was two Python frames a record, and the compat producer spent 501 ns of CPU a 100 B record where the native
one, whose send() is the accumulator's compiled send_record, spent 217 (Apache Kafka). Here the checks are C and
the record goes to send_record in one vectorcall. KafkaProducer.send (Python) remains the way for everything else,
with the same checks and errors.
"""
cimport cython

from fastmq.kafka.errors import MessageSizeTooLargeError


cpdef int check_headers(object headers) except -1:
    """kafka-python's first check: headers are None or a list."""
    if headers is not None and not isinstance(headers, list):
        raise TypeError("headers must be list-type")
    return 0


cdef bint _pairs(list headers):
    # Whether every header is a (str, bytes) tuple.
    for item in headers:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], bytes)):
            return False
    return True


@cython.final
cdef class KafkaPythonSend:
    """send(topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None): kafka-python's checks,
    then send_record (the accumulator's, which fetches metadata for a topic it does not know)."""

    cdef object send_record
    cdef Py_ssize_t max_payload         # max_request_size less kafka-python's estimate of a record's overhead
    cdef Py_ssize_t record_overhead

    def __init__(self, send_record, Py_ssize_t max_payload, Py_ssize_t record_overhead):
        self.send_record = send_record
        self.max_payload = max_payload
        self.record_overhead = record_overhead

    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        check_headers(headers)
        self.check_size(key, value)
        return self.append(self.send_record, topic, value, key, headers, partition, timestamp_ms)

    cpdef object append(self, object append, object topic, object value, object key, object headers,
                        object partition, object timestamp_ms):
        """append(topic, value, key, headers, partition, timestamp_ms) -> its answer, with the accumulator's
        TypeError or ValueError for headers that are not (str, bytes) pairs made kafka-python's TypeError."""
        try:
            return append(topic, value, key, headers, partition, timestamp_ms)
        except (TypeError, ValueError):
            if headers and not _pairs(headers):
                raise TypeError("All headers items must be (str, bytes) tuples") from None
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
