# cython: language_level=3
"""CommitLog records of the RocketMQ 4.x store (see store_codec.pyx for the byte layout). Everything here works
on borrowed memory: mmap'd store files or bytes from the wire."""
cimport cython
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memchr
from cpython cimport array

from fastmq._native.buffer cimport WriteBuffer
from fastmq._native.checksum cimport crc32_of

cdef enum:
    MESSAGE_MAGIC_CODE = -626843481      # 0xDAA320A7: a record whose topic length is one byte
    MESSAGE_MAGIC_CODE_V2 = -626843477   # 0xDAA320AB: the topic length is two bytes (topics > 127 bytes)
    BLANK_MAGIC_CODE = -875286124        # 0xCBD43194: the filler that closes a CommitLog file
    END_FILE_MIN_BLANK_LENGTH = 8        # [size i32][BLANK magic]: always kept free at the end of a file

    # Fixed offsets of the record header (everything before BORNHOST has a fixed position).
    OFFSET_TOTAL_SIZE = 0
    OFFSET_MAGIC = 4
    OFFSET_BODY_CRC = 8
    OFFSET_QUEUE_ID = 12
    OFFSET_FLAG = 16
    OFFSET_QUEUE_OFFSET = 20
    OFFSET_PHYSICAL_OFFSET = 28
    OFFSET_SYS_FLAG = 36
    OFFSET_BORN_TIMESTAMP = 40
    OFFSET_BORN_HOST = 48

    SYSFLAG_COMPRESSED = 0x1
    SYSFLAG_MULTI_TAGS = 0x2
    SYSFLAG_TRANSACTION_MASK = 0xC       # bits 2-3: not a transaction 0, prepared 4, commit 8, rollback 12
    SYSFLAG_TRANSACTION_PREPARED = 0x4
    SYSFLAG_TRANSACTION_ROLLBACK = 0xC
    SYSFLAG_BORNHOST_V6 = 0x10
    SYSFLAG_STOREHOST_V6 = 0x20

    HOST_V4_LENGTH = 8                   # 4-byte address + 4-byte port
    HOST_V6_LENGTH = 20                  # 16-byte address + 4-byte port
    MAX_SHORT_TOPIC_LENGTH = 127         # longest topic a V1 record holds (Java reads the length as a signed byte)
    MAX_PROPERTIES_LENGTH = 32767        # the properties length is a signed short

    # TOTALSIZE .. PREPAREDTRANSACTIONOFFSET with both hosts IPv4, plus BODYLENGTH, TOPICLENGTH and
    # PROPERTIESLENGTH: the smallest possible V1 record.
    MIN_RECORD_SIZE = OFFSET_BORN_HOST + HOST_V4_LENGTH + 8 + HOST_V4_LENGTH + 4 + 8 + 4 + 1 + 2

# What check_message found at a position (also the `status` of a DispatchRequest).
cdef enum RecordStatus:
    RECORD_OK = 0           # a whole, consistent message
    RECORD_BLANK = 1        # the end-of-file filler; the next record starts in the next file
    RECORD_END = 2          # no record here: the total size is zero (never written, or torn before publishing)
    RECORD_INCOMPLETE = 3   # a plausible header whose record extends past the readable bytes
    RECORD_CORRUPT = 4      # anything else: bad magic, lengths that do not add up, CRC mismatch, wrong offset

ctypedef struct RecordLayout:
    int32_t total_size                   # TOTALSIZE (the blank's length for RECORD_BLANK)
    int32_t magic                        # MAGICCODE
    int32_t body_crc                     # BODYCRC as stored
    int32_t queue_id                     # QUEUEID
    int32_t flag                         # FLAG (the producer's int flag)
    int64_t queue_offset                 # QUEUEOFFSET: logical position in its ConsumeQueue
    int64_t physical_offset              # PHYSICALOFFSET: where the record starts in the CommitLog
    int32_t sys_flag                     # SYSFLAG
    int64_t born_timestamp               # BORNTIMESTAMP (ms)
    const char* born_host                # BORNHOST address bytes followed by the port
    int32_t born_host_length             # 8 or 20
    int64_t store_timestamp              # STORETIMESTAMP (ms)
    const char* store_host               # STOREHOST address bytes followed by the port
    int32_t store_host_length            # 8 or 20
    int32_t reconsume_times              # RECONSUMETIMES
    int64_t prepared_transaction_offset  # PREPAREDTRANSACTIONOFFSET
    const char* body                     # BODY bytes
    int32_t body_length                  # BODY length
    const char* topic                    # TOPIC bytes (UTF-8)
    int32_t topic_length                 # TOPIC length
    const char* properties               # PROPERTIES bytes: key \x01 value \x02 ...
    int32_t properties_length            # PROPERTIES length
    const char* error                    # why the record is RECORD_CORRUPT (a static string)

ctypedef struct Property:
    const char* name
    Py_ssize_t name_length
    const char* value
    Py_ssize_t value_length


cdef inline bint next_property(const char** p, const char* end, Property* out) noexcept nogil:
    # Steps through PROPERTIES (name \x01 value \x02 entries; the last \x02 may be missing) from p[0] to end,
    # skipping entries without \x01 as RocketMQ's MessageDecoder does; False once there is none left.
    cdef const char* start
    cdef const char* entry_end
    cdef const char* separator
    while p[0] < end:
        start = p[0]
        entry_end = <const char*>memchr(start, 2, end - start)
        if entry_end == NULL:
            entry_end = end
        p[0] = entry_end + 1
        separator = <const char*>memchr(start, 1, entry_end - start)
        if separator != NULL:
            out.name = start
            out.name_length = separator - start
            out.value = separator + 1
            out.value_length = entry_end - separator - 1
            return True
    return False


cdef RecordStatus parse_record(const char* p, Py_ssize_t readable, Py_ssize_t room,
                               RecordLayout* r) noexcept nogil


cdef inline int32_t body_crc_of(const char* body, Py_ssize_t length) noexcept:
    # BODYCRC is the body's CRC32 with the sign bit cleared, as Java's UtilAll.crc32 gives it.
    return <int32_t>(crc32_of(body, length) & 0x7FFFFFFF)


cdef inline bint body_crc_matches(const RecordLayout* r) noexcept:
    return body_crc_of(r.body, r.body_length) == r.body_crc

cdef int32_t java_string_hash(str s) noexcept
cdef dict parse_properties(const char* p, Py_ssize_t n)   # PROPERTIES as {name: value} (CorruptDataError for bad UTF-8)


@cython.final
cdef class DispatchRequest:
    cdef readonly int status                        # a RecordStatus
    cdef readonly str topic                         # the message's topic
    cdef readonly int32_t queue_id                  # its queue
    cdef readonly int64_t commitlog_offset          # where its record starts
    cdef readonly int32_t msg_size                  # record size (the blank's size for RECORD_BLANK)
    cdef readonly int64_t tags_code                 # Java hashCode of the TAGS property, 0 without tags
    cdef readonly int64_t store_timestamp           # STORETIMESTAMP
    cdef readonly int64_t consume_queue_offset      # QUEUEOFFSET
    cdef readonly str keys                          # KEYS property (space-separated keys) or None
    cdef readonly str uniq_key                      # UNIQ_KEY property (client message id) or None
    cdef readonly int32_t sys_flag                  # SYSFLAG (transaction type decides dispatching)
    cdef readonly int64_t prepared_transaction_offset  # PREPAREDTRANSACTIONOFFSET
    cdef readonly str error                         # reason for RECORD_CORRUPT, else None


ctypedef struct PendingMessage:
    # What a MessageBatch keeps per message until it is encoded; the bytes are in the batch's arena, or the body in
    # a buffer the batch holds.
    int64_t data_offset              # where [born host][properties][body] start in the arena
    const char* held_body            # the body in a held buffer (MessageBatch.hold); NULL: in the arena
    int64_t born_timestamp           # BORNTIMESTAMP
    int64_t tags_code                # ConsumeQueue tags code (Java hashCode of TAGS, 0 without tags)
    int32_t body_length              # BODY bytes
    int32_t properties_length        # PROPERTIES bytes
    int32_t born_host_length         # BORNHOST bytes; 0: the store host
    int32_t flag                     # FLAG


@cython.final
cdef class MessageBatch:
    cdef readonly str topic                       # every message's topic
    cdef readonly int32_t queue_id                # and queue
    cdef Py_ssize_t _topic_length                 # UTF-8 length of the topic
    cdef bytes _store_host                        # STOREHOST (also the default BORNHOST)
    cdef Py_ssize_t _max_body_size                # add() refuses larger bodies
    cdef Py_ssize_t _max_record_size              # add() refuses larger records (a file minus the blank)
    cdef readonly int32_t sys_flag                # SYSFLAG of every message (transaction type)
    cdef readonly int32_t reconsume_times         # RECONSUMETIMES of every message
    cdef readonly int64_t prepared_transaction_offset  # PREPAREDTRANSACTIONOFFSET of every message
    cdef WriteBuffer _arena                       # the messages' bytes: per message [born host][properties][body]
    cdef WriteBuffer _pending                     # one PendingMessage per message, in order
    cdef array.array _record_sizes                # 'i' record size per message (computed by append)
    cdef array.array _commitlog_offsets           # 'q' where each written record starts
    cdef readonly list index_items                # (message index, KEYS, UNIQ_KEY) of messages to index
    cdef readonly Py_ssize_t count                # messages added
    cdef readonly Py_ssize_t written              # messages encoded into the CommitLog so far
    cdef readonly int64_t total_bytes             # sum of the record sizes
    cdef readonly int64_t first_queue_offset      # queue offset of message 0 (set by begin)
    cdef readonly int64_t store_timestamp         # STORETIMESTAMP of every message (set by begin)
    cdef Py_buffer* _held                         # buffers that held bodies point into, released once encoded
    cdef Py_ssize_t _held_count                   # entries of _held in use
    cdef Py_ssize_t _held_capacity                # entries of _held allocated

    cdef int reserve(self, Py_ssize_t messages, Py_ssize_t data_bytes) except -1
    cdef const char* hold(self, object source, Py_ssize_t* length) except NULL
    cdef void release_held(self) noexcept
    cdef int append(self, const char* body, Py_ssize_t body_length, const char* properties,
                    Py_ssize_t properties_length, int64_t tags_code, int64_t born_timestamp, int32_t flag,
                    const char* born_host, Py_ssize_t born_host_length, bint body_held) except -1
