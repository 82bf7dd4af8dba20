"""Type stubs of fastmq.kafka._native.records (the Kafka RecordBatch v2 format is documented in records.pyx)."""
import struct
from typing import Iterator

from typing_extensions import Buffer

Headers = list[tuple[str, bytes | None]]

class DefaultRecordBase:
    HEADER_STRUCT: struct.Struct
    ATTRIBUTES_OFFSET: int
    CRC_OFFSET: int
    AFTER_LEN_OFFSET: int
    CODEC_MASK: int
    CODEC_NONE: int
    CODEC_GZIP: int
    CODEC_SNAPPY: int
    CODEC_LZ4: int
    CODEC_ZSTD: int
    TIMESTAMP_TYPE_MASK: int
    TRANSACTIONAL_MASK: int
    CONTROL_MASK: int
    LOG_APPEND_TIME: int
    CREATE_TIME: int
    NO_PRODUCER_ID: int
    NO_SEQUENCE: int
    MAX_INT: int

class RecordMetadata:
    offset: int
    size: int
    timestamp: int
    @property
    def crc(self) -> None: ...

class RecordBatchBuilder(DefaultRecordBase):
    MAX_RECORD_OVERHEAD: int
    def __init__(self, magic: int, compression_type: int, is_transactional: bool, producer_id: int,
                 producer_epoch: int, base_sequence: int, batch_size: int, *, compression_level: int = -1,
                 base_offset: int = 0, leader_epoch: int = 0, timestamp_type: int = 0, control: bool = False,
                 initial_capacity: int = -1, storage: bytearray | None = None) -> None: ...
    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           is_transactional: bool) -> None: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    @property
    def compression_type(self) -> int: ...
    @property
    def uncompressed_size(self) -> int: ...
    def append(self, offset: int, timestamp: int | None, key: Buffer | None, value: Buffer | None,
               headers: Headers | None) -> RecordMetadata | None: ...
    def build(self) -> bytearray: ...
    def write_header(self, use_compression_type: bool = True) -> None: ...
    def size(self) -> int: ...
    @classmethod
    def header_size_in_bytes(cls) -> int: ...
    @classmethod
    def size_in_bytes(cls, offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                      headers: Headers) -> int: ...
    @classmethod
    def size_of(cls, key: bytes | None, value: bytes | None, headers: Headers) -> int: ...
    @classmethod
    def estimate_size_in_bytes(cls, key: bytes | None, value: bytes | None, headers: Headers) -> int: ...

class Record:
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    size_in_bytes: int
    @property
    def headers(self) -> Headers: ...
    @property
    def checksum(self) -> None: ...
    def validate_crc(self) -> bool: ...

class ControlRecord(Record):
    KEY_STRUCT: struct.Struct
    version: int
    type: int
    @property
    def abort(self) -> bool: ...
    @property
    def commit(self) -> bool: ...

class RecordBatch(DefaultRecordBase):
    def __init__(self, buffer: Buffer, max_decompressed_size: int = ...) -> None: ...
    def __iter__(self) -> Iterator[Record]: ...
    def __next__(self) -> Record: ...
    def next(self) -> Record: ...
    def validate_crc(self) -> bool: ...
    base_offset: int
    size_in_bytes: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    last_offset: int
    next_offset: int
    compression_type: int
    timestamp_type: int
    is_transactional: bool
    is_control_batch: bool
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    has_sequence: bool
    last_sequence: int
    records_count: int
    def has_producer_id(self) -> bool: ...

DEFAULT_MAX_DECOMPRESSED_SIZE: int
