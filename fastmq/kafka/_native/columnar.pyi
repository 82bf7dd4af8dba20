"""Type stubs of fastmq.kafka._native.columnar (the output layout is documented in columnar.pyx)."""
from typing import Any

from typing_extensions import Buffer

class RecordColumns:
    count: int
    header_count: int
    offsets: bytearray
    timestamps: bytearray
    key_views: bytearray
    key_validity: bytearray | None
    value_views: bytearray
    value_validity: bytearray | None
    header_offsets: bytearray
    header_key_views: bytearray
    header_value_views: bytearray
    header_value_validity: bytearray | None
    data_buffers: list[Any]
    def offset_list(self) -> list[int]: ...
    def timestamp_list(self) -> list[int]: ...
    def to_arrow(self, *, view_types: bool = True, **constant_columns: Any) -> Any: ...

def decode_columns(buffer: Buffer, *, check_crcs: bool = False, skip_control: bool = True,
                   max_decompressed_size: int = ...) -> RecordColumns: ...

DEFAULT_MAX_DECOMPRESSED_SIZE: int
