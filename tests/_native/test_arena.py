"""The producer's batch storage (fastmq/_native/arena.pyx): buddy blocks of one reused mapping, and WriteBuffers
written into them."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastmq._native.arena import Arena, ArenaBlock
from fastmq._native.buffer import WriteBuffer

PAGE = 4096
HUGE_PAGE = 2 << 20


def pattern(seed: int, size: int) -> bytes:
    return bytes((seed + i) % 251 for i in range(size))


def test_blocks_are_pages_rounded_up_to_a_power_of_two_and_aligned_to_their_size():
    arena = Arena(4 << 20, 256 << 10)
    assert arena.largest == 256 << 10 and arena.size == 4 << 20
    sizes = [1, PAGE, PAGE + 1, 3 * PAGE, 100_000, 256 << 10]
    blocks = [arena.block(size) for size in sizes]
    assert [b.capacity for b in blocks] == [PAGE, PAGE, 2 * PAGE, 4 * PAGE, 32 * PAGE, 64 * PAGE]
    assert all(b.in_arena and b.address % b.capacity == 0 for b in blocks)
    # The first block starts a huge page: the mapping is aligned for MADV_HUGEPAGE.
    assert min(b.address for b in blocks) % HUGE_PAGE == 0
    assert arena.in_use == sum(b.capacity for b in blocks) and arena.outside == 0


def test_a_freed_block_is_reused_and_buddies_merge_back_into_whole_blocks():
    arena = Arena(1 << 20, 64 << 10)
    first = arena.block(PAGE)
    address = first.address
    del first
    assert arena.in_use == 0
    # Both halves of every split merged again: one whole largest block is free, nothing more was carved.
    assert arena.free_blocks() == [(0, 64 << 10)] and arena.touched == 64 << 10
    again = arena.block(100)
    assert again.address == address and arena.touched == 64 << 10


def test_what_the_arena_cannot_serve_is_malloced_and_counted_apart():
    arena = Arena(128 << 10, 64 << 10)      # two largest blocks
    large = arena.block(1 << 20)            # larger than any block
    assert not large.in_arena and arena.outside == 1 << 20 and arena.in_use == 0
    held = [arena.block(64 << 10) for _ in range(2)]
    spill = arena.block(PAGE)               # the arena is full
    assert not spill.in_arena and arena.outside == (1 << 20) + PAGE
    del large, spill
    assert arena.outside == 0 and arena.in_use == 2 * (64 << 10)
    del held
    assert arena.in_use == 0


def test_blocks_come_from_an_arena_only():
    with pytest.raises(TypeError):
        ArenaBlock()
    with pytest.raises(ValueError):
        Arena(1 << 20, 1 << 60)             # blocks larger than the allocator's orders


def test_a_block_exports_its_written_part_and_does_not_move_while_a_view_is_alive():
    buffer = WriteBuffer(16, 0, Arena(1 << 20, 64 << 10).block(PAGE))
    buffer.write(b"abc")
    assert buffer.getvalue() == b"abc" and len(buffer) == 3
    view = buffer.parts()[0]
    assert bytes(view) == b"abc"
    with pytest.raises(BufferError):
        buffer.write(b"x" * (2 * PAGE))     # would move the block under the view
    view.release()
    buffer.write(b"x" * (2 * PAGE))
    assert buffer.getvalue() == b"abc" + b"x" * (2 * PAGE)


def test_a_write_buffer_over_a_block_grows_into_larger_blocks_keeping_its_bytes():
    arena = Arena(1 << 20, 64 << 10)
    buffer = WriteBuffer(16, 0, arena.block(100))
    data = pattern(7, 100_000)              # past the largest block: the last move leaves the arena
    for start in range(0, len(data), 999):
        buffer.write(data[start:start + 999])
    assert buffer.getvalue() == data
    assert arena.in_use == 0 and arena.outside >= len(data)     # the blocks it left went back
    del buffer
    assert arena.outside == 0


def test_a_finished_block_gives_back_the_pages_past_its_bytes_and_they_serve_smaller_blocks():
    arena = Arena(1 << 20, 64 << 10)
    buffer = WriteBuffer(16, 0, arena.block(PAGE))
    buffer.write(pattern(3, 20_000))                # moved 4 -> 8 -> 16 -> 32 KiB
    block = finished(buffer)
    assert block.capacity == 32 << 10 and arena.in_use == 32 << 10
    assert block.trimmed() is block and block.capacity == 5 * PAGE and arena.in_use == 5 * PAGE
    assert bytes(block) == pattern(3, 20_000)
    # It is the upper half of the first 64 KiB (its earlier blocks merged back into the lower half); the pages past
    # its bytes are free blocks of their own: page 5, pages 6-7.
    assert sorted(arena.free_blocks()) == [(0, 32 << 10), ((32 << 10) + 5 * PAGE, PAGE),
                                           ((32 << 10) + 6 * PAGE, 2 * PAGE)]
    after = arena.block(2 * PAGE)
    assert after.address == block.address + 6 * PAGE
    block.trimmed()                                 # once only
    assert arena.in_use == 7 * PAGE
    del block, buffer, after
    assert arena.in_use == 0 and arena.free_blocks() == [(0, 64 << 10)]


# One step: allocate (size), grow (which live block, to what size), finish (which live block: it gives back the
# pages past its bytes, and grows no more) or free (which live block).
STEPS = st.lists(st.one_of(
    st.tuples(st.just("allocate"), st.integers(min_value=1, max_value=80_000)),
    st.tuples(st.just("grow"), st.integers(min_value=0, max_value=1000), st.integers(min_value=1, max_value=80_000)),
    st.tuples(st.just("finish"), st.integers(min_value=0, max_value=1000)),
    st.tuples(st.just("free"), st.integers(min_value=0, max_value=1000)),
), max_size=60)


@settings(max_examples=60, deadline=None)
@given(steps=STEPS)
def test_random_allocations_never_overlap_keep_their_bytes_and_account_exactly(steps):
    # An arena of four 32 KiB blocks: big requests and a full arena fall back to malloc along the way.
    arena = Arena(128 << 10, 32 << 10)
    live: list[tuple[WriteBuffer | None, ArenaBlock, bytes]] = []  # a buffer (None once finished), its block, bytes
    # (Helpers, so that no local variable of this loop keeps a freed block alive.)
    for n, step in enumerate(steps):
        if step[0] == "allocate":
            live.append(written(arena.block(step[1]), pattern(n, min(step[1], 3000))))
        elif live and step[0] == "grow" and live[step[1] % len(live)][0] is not None:
            # More bytes than the block holds: it moves to a larger class (or out of the arena) with its bytes.
            live[step[1] % len(live)] = appended(live[step[1] % len(live)], pattern(n, step[2]))
        elif live and step[0] == "finish" and live[step[1] % len(live)][0] is not None:
            live[step[1] % len(live)] = trimmed(live[step[1] % len(live)])
        elif live and step[0] == "free":
            del live[step[1] % len(live)]
        check(arena, live)
    live.clear()
    assert arena.in_use == 0 and arena.outside == 0
    # Everything given back merged into whole largest blocks again.
    assert all(size == 32 << 10 for _, size in arena.free_blocks())
    assert len(arena.free_blocks()) * (32 << 10) == arena.touched


def check(arena: Arena, live: list[tuple[WriteBuffer | None, ArenaBlock, bytes]]) -> None:
    blocks = [block for _, block, _ in live]
    spans = sorted((b.address, b.capacity) for b in blocks)
    assert all(a_start + a_size <= b_start for (a_start, a_size), (b_start, _) in zip(spans, spans[1:]))
    assert arena.in_use == sum(b.capacity for b in blocks if b.in_arena)
    assert arena.outside == sum(b.capacity for b in blocks if not b.in_arena)
    assert all((bytes(block) if buffer is None else buffer.getvalue()) == content for buffer, block, content in live)


def finished(buffer: WriteBuffer) -> ArenaBlock:
    """The block under a buffer that is done, exporting what was written (as a finished batch's payload)."""
    (block,) = buffer.parts()
    return block.obj


def trimmed(entry: tuple[WriteBuffer, ArenaBlock, bytes]) -> tuple[None, ArenaBlock, bytes]:
    buffer, _, content = entry
    return None, finished(buffer).trimmed(), content


def written(block: ArenaBlock, content: bytes) -> tuple[WriteBuffer, ArenaBlock, bytes]:
    buffer = WriteBuffer(16, 0, block)
    buffer.write(content)
    return buffer, block, content


def appended(entry: tuple[WriteBuffer, ArenaBlock, bytes], extra: bytes) -> tuple[WriteBuffer, ArenaBlock, bytes]:
    buffer, block, content = entry
    buffer.write(extra)
    return buffer, block, content + extra
