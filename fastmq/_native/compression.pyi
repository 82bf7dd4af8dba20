from typing_extensions import Buffer

DEFAULT_MAX_DECOMPRESSED_SIZE: int
CODEC_NAMES: dict[int, str]

def compress(codec: int, data: Buffer, level: int = -1) -> bytes: ...
def decompress(codec: int, data: Buffer, max_size: int = ...) -> bytearray: ...
