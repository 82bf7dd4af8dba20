"""Type stubs of fastmq.rocketmq._native.remoting (see remoting.pyx for the frame and header layouts)."""
from typing import Any

from typing_extensions import Buffer

SERIALIZE_JSON: int
SERIALIZE_ROCKETMQ: int
FLAG_RESPONSE: int
FLAG_ONEWAY: int
VERSION: int
LANGUAGES: dict[str, int]
LANGUAGE_NAMES: dict[int, str]

class RemotingCommand:
    code: int
    language: int
    version: int
    opaque: int
    flag: int
    remark: str | None
    ext_fields: dict[str, str]
    body: bytes | None
    serialize_type: int
    def __init__(self, code: int, opaque: int = ..., *, flag: int = ..., ext_fields: dict[str, Any] | None = ...,
                 body: Buffer | None = ..., remark: str | None = ..., language: int = ..., version: int = ...,
                 serialize_type: int = ...) -> None: ...
    @property
    def is_response(self) -> bool: ...
    @property
    def is_oneway(self) -> bool: ...
    @property
    def language_name(self) -> str: ...
    def encode(self) -> bytes: ...

def encode_frame(code: int, opaque: int, ext_fields: dict[str, Any] | None = ..., body: Buffer | None = ...,
                 flag: int = ..., serialize_type: int = ..., language: int = ..., version: int = ...,
                 remark: str | None = ...) -> bytes: ...
def decode_command(frame: Buffer, with_total: bool = ...) -> RemotingCommand: ...
def response_opaque(frame: Buffer) -> int | None: ...
