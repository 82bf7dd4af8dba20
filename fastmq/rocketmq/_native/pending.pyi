"""Type stubs of fastmq.rocketmq._native.pending (see pending.pyx)."""
from typing import Any

DEFAULT_MAX_PENDING_BYTES: int

class PendingBytes:
    limit: int
    reserved: int
    released: int
    waiting: int
    def __init__(self, limit: int) -> None: ...
    @property
    def used(self) -> int: ...
    def reserve(self, size: int, deadline: float) -> None: ...
    def release(self, size: int) -> None: ...

class Holding:
    target: Any
    def __init__(self, target: Any, pending: PendingBytes, held: int) -> None: ...

class DecodingCallback(Holding):
    def __call__(self, frame: Any, error: BaseException | None) -> None: ...

class FrameCallback(Holding):
    def __call__(self, frame: Any, error: BaseException | None) -> None: ...

class Written(Holding):
    def __call__(self, frame: Any, error: BaseException | None) -> None: ...
