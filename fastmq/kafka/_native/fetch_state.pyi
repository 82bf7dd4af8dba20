"""Type stubs of fastmq.kafka._native.fetch_state (see fetch_state.pyx: the consumer's per-partition fetch
bookkeeping)."""
from collections import deque
from collections.abc import Iterable
from typing import Any

from fastmq.kafka.structs import TopicPartition

class PartitionState:
    tp: TopicPartition
    position: int | None
    leader_epoch: int
    epoch: int
    paused: bool
    reset_to: int | None
    reset_epoch: int
    highwater: int | None
    last_stable_offset: int | None
    log_start_offset: int | None
    fetch_offset: int | None
    fetch_epoch: int
    in_flight: bool
    scan_ahead: bool
    waiting: int
    queued: int
    drained: int
    retry_at: float
    def __init__(self, tp: TopicPartition) -> None: ...
    @property
    def has_position(self) -> bool: ...
    @property
    def awaiting_reset(self) -> bool: ...
    def is_fetchable(self) -> bool: ...

class CompletedFetch:
    state: PartitionState
    epoch: int
    position: int
    records: list[Any]
    next_offset: int
    error: BaseException | None
    bytes_per_record: float
    index: int
    size: int
    def __init__(self, state: PartitionState, epoch: int, position: int, records: list[Any], next_offset: int,
                 error: BaseException | None, bytes_per_record: float = 0.0, index: int = 0,
                 size: int = 0) -> None: ...


def sort_visits(visit: Iterable[PartitionState], assignment: dict[TopicPartition, PartitionState], now: float,
                cluster: Any, prefetch_depth: int
                ) -> tuple[dict[int, list[tuple[PartitionState, int, int]]], dict[int, list[tuple[PartitionState, int]]],
                           list[PartitionState], float]: ...
def start_fetch(items: list[tuple[PartitionState, int, int]], cluster: Any
                ) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, tuple[PartitionState, int, int]]]: ...
def changed_partitions(wanted: dict[TopicPartition, tuple[int, int]],
                       known: dict[TopicPartition, tuple[int, int]]) -> list[TopicPartition]: ...
def end_fetch(sent: dict[TopicPartition, tuple[PartitionState, int, int]], touched: deque[PartitionState]) -> None: ...
def sort_response(responses: Iterable[Any], by_topic_id: bool, topic_names: dict[Any, str],
                  sent: dict[TopicPartition, tuple[PartitionState, int, int]], assignment: dict[TopicPartition, PartitionState]
                  ) -> tuple[list[tuple[Any, str, int, int, Any]], list[tuple[PartitionState, int, int, int, int]],
                             list[tuple[PartitionState, int, int, int]], bool, int]: ...
def set_end_offset(records: Any, fetch_offset: int) -> int: ...
def take_touched(touched: deque[PartitionState], visit: dict[PartitionState, None]) -> None: ...
def complete_fetches(targets: list[tuple[PartitionState, int, int, int, int]], start: int,
                     results: list[tuple[list[Any], int, BaseException | None]], completed: deque[CompletedFetch],
                     touched: deque[PartitionState], retry_at: float
                     ) -> tuple[int, int, int, int, list[tuple[PartitionState, int]]]: ...
