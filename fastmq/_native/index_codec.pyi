"""Type stubs of fastmq._native.index_codec (see index_codec.pyx for the IndexFile format)."""
from typing_extensions import Buffer

INDEX_HEADER_LENGTH: int
INDEX_SLOT_LENGTH: int
INDEX_ENTRY_LENGTH: int

def index_key_hash(key: str) -> int: ...
def index_put(buf: Buffer, slot_num: int, index_num: int, key_hash: int, phy_offset: int,
              store_timestamp: int) -> bool: ...
def index_select(buf: Buffer, slot_num: int, index_num: int, key_hash: int, max_num: int, begin: int,
                 end: int) -> list[int]: ...
