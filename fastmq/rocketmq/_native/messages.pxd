# cython: language_level=3
"""What the RocketMQ message codec shares with compiled code elsewhere (the broker's batch path)."""
from libc.stdint cimport int16_t, int32_t

ctypedef struct BatchItem:
    # One message of a SEND_BATCH_MESSAGE body (layout in messages.pyx), pointing into the body.
    int32_t total                    # TOTALSIZE: the item's bytes
    int32_t flag                     # FLAG
    const char* body                 # BODY
    int32_t body_length
    const char* properties           # PROPERTIES (name \x01 value \x02 ...)
    int16_t properties_length

# Reads the item at data[pos:length] (TruncatedError / CorruptDataError naming what is wrong).
cdef int read_batch_item(const char* data, Py_ssize_t pos, Py_ssize_t length, BatchItem* item) except -1
