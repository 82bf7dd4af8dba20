"""MappedFile / MappedFileQueue: names, arithmetic lookup, growth, flush positions, truncation, load checks, disk
blocks that follow the data, and the bound on open mappings."""
from __future__ import annotations

import os
import random
import threading

import pytest

from fastmq.store.errors import CorruptStoreError, StoreConfigError
from fastmq.store.mapped_file import OS_PAGE_SIZE, MappedFile, MappedFileQueue, OpenMappings, offset_to_file_name

from .conftest import allocated, descriptors_of, maps_of


def test_file_names_are_20_digit_offsets():
    assert offset_to_file_name(0) == "00000000000000000000"
    assert offset_to_file_name(1073741824) == "00000000001073741824"


def fill(queue: MappedFileQueue, nbytes: int) -> None:
    while nbytes:
        mapped = queue.get_writable_file()
        step = min(nbytes, mapped.file_size - mapped.wrote_position)
        mapped.view[mapped.wrote_position:mapped.wrote_position + step] = b"\x01" * step
        mapped.wrote_position += step
        nbytes -= step


class TestQueue:
    def test_growth_and_lookup_by_arithmetic(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 4096)
        fill(queue, 3 * 4096 + 100)
        assert [p.name for p in sorted((tmp_path / "q").iterdir())] == [
            offset_to_file_name(i * 4096) for i in range(4)]
        # Seed 003's example: offset 1073741827 in 1 GiB files is in the second file.
        assert queue.find_mapped_file_by_offset(4096 + 3).file_from_offset == 4096
        assert queue.find_mapped_file_by_offset(3 * 4096 + 99).file_from_offset == 3 * 4096
        assert queue.find_mapped_file_by_offset(5 * 4096) is None
        assert queue.find_mapped_file_by_offset(5 * 4096, return_first_on_not_found=True).file_from_offset == 0
        assert (queue.get_min_offset(), queue.get_max_offset()) == (0, 3 * 4096 + 100)
        queue.close()

    def test_first_file_may_start_mid_queue(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 4096)
        assert queue.get_writable_file(3 * 4096 + 40).file_from_offset == 3 * 4096
        assert queue.flushed_where == 3 * 4096
        queue.close()

    def test_flush_moves_flushed_where_across_files(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 4096)
        fill(queue, 4096 + 10)
        flushed, _ = queue.flush(least_pages=4)
        assert flushed and queue.flushed_where == 4096   # a full file always flushes; 10 bytes are < 4 pages
        flushed, _ = queue.flush(least_pages=0)
        assert flushed and queue.flushed_where == 4096 + 10
        assert queue.flush(least_pages=0) == (False, 0)
        queue.close()

    def test_truncate_dirty_files_zeroes_and_deletes(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 4096)
        fill(queue, 3 * 4096)
        queue.truncate_dirty_files(4096 + 100)
        assert [m.file_from_offset for m in queue.files] == [0, 4096]
        last = queue.files[-1]
        assert last.wrote_position == 100
        assert bytes(last.view[99:101]) == b"\x01\x00" and not any(last.view[100:])
        assert not (tmp_path / "q" / offset_to_file_name(2 * 4096)).exists()
        queue.close()

    def test_delete_first_files_keeps_the_last(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 4096)
        fill(queue, 2 * 4096 + 1)
        assert len(queue.delete_first_files(5)) == 2
        assert [m.file_from_offset for m in queue.files] == [2 * 4096]
        assert queue.delete_first_files(1) == []
        queue.close()

    def test_readers_keep_their_view_after_destroy(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 4096)
        fill(queue, 4096 + 10)
        view = queue.files[0].select(0, 16)
        queue.delete_first_files(1)
        assert bytes(view) == b"\x01" * 16           # still mapped for this reader
        assert not (tmp_path / "q" / offset_to_file_name(0)).exists()
        view.release()
        queue.close()


class TestLoad:
    def test_reload(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 4096)
        fill(queue, 4096 + 10)
        queue.close()
        again = MappedFileQueue(tmp_path / "q", 4096)
        again.load()
        assert [m.wrote_position for m in again.files] == [4096, 4096]   # recovery sets the real end
        again.close()

    def test_wrong_size_is_reported(self, tmp_path):
        (tmp_path / "q").mkdir()
        (tmp_path / "q" / offset_to_file_name(0)).write_bytes(b"\x00" * 100)
        with pytest.raises(CorruptStoreError, match="100 bytes, expected 4096"):
            MappedFileQueue(tmp_path / "q", 4096).load()

    def test_gap_is_reported(self, tmp_path):
        (tmp_path / "q").mkdir()
        for offset in (0, 8192):
            (tmp_path / "q" / offset_to_file_name(offset)).write_bytes(b"\x00" * 4096)
        with pytest.raises(CorruptStoreError, match="missing"):
            MappedFileQueue(tmp_path / "q", 4096).load()

    def test_misaligned_name_is_reported(self, tmp_path):
        (tmp_path / "q").mkdir()
        (tmp_path / "q" / offset_to_file_name(100)).write_bytes(b"\x00" * 4096)
        with pytest.raises(StoreConfigError):
            MappedFileQueue(tmp_path / "q", 4096).load()

    def test_other_files_ignored_and_size_inferred_read_only(self, tmp_path):
        (tmp_path / "q").mkdir()
        (tmp_path / "q" / "notes.txt").write_text("x")
        (tmp_path / "q" / offset_to_file_name(0)).write_bytes(b"\x00" * 8192)
        queue = MappedFileQueue(tmp_path / "q", 4096, read_only=True)
        queue.load(infer_size=True)
        assert queue.mapped_file_size == 8192 and len(queue.files) == 1
        queue.close()

    def test_read_only_file_is_not_writable(self, tmp_path):
        path = tmp_path / offset_to_file_name(0)
        path.write_bytes(b"\x00" * 4096)
        mapped = MappedFile(path, 4096, read_only=True)
        with pytest.raises(TypeError):
            mapped.view[0:1] = b"x"
        mapped.close()


class TestDiskFollowsData:
    def test_new_file_is_sparse(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 1 << 20)
        mapped = queue.get_writable_file()
        assert os.stat(mapped.path).st_size == 1 << 20
        assert allocated(mapped.path) == 0 and mapped.data_end() == 0
        queue.close()

    def test_appends_reserve_in_doubling_steps_up_to_the_cap(self, tmp_path):
        reserve_ahead = 64 << 10
        mapped = MappedFile(tmp_path / offset_to_file_name(0), 1 << 20, reserve_ahead=reserve_ahead)
        reserved = []
        written = 0
        while written < mapped.file_size:
            step = min(1000, mapped.file_size - written)
            mapped.append_view(written + step)[written:written + step] = b"\x05" * step
            written = mapped.wrote_position = written + step
            if not reserved or reserved[-1] != mapped.reserved_position:
                reserved.append(mapped.reserved_position)
            # Every written byte has its block; at most one step more is held (and a block or two the filesystem
            # may add for its extent tree).
            assert written <= allocated(mapped.path) <= mapped.reserved_position + 2 * OS_PAGE_SIZE
            assert mapped.reserved_position <= written + reserve_ahead + OS_PAGE_SIZE
        steps = [b - a for a, b in zip([0] + reserved, reserved)]
        assert steps[:4] == [OS_PAGE_SIZE, 2 * OS_PAGE_SIZE, 4 * OS_PAGE_SIZE, 8 * OS_PAGE_SIZE]
        assert max(steps) <= reserve_ahead + OS_PAGE_SIZE and reserved[-1] == mapped.file_size
        assert bytes(mapped.view) == b"\x05" * mapped.file_size
        mapped.close()

    def test_reserving_zeroes_past_the_write_position_only(self, tmp_path):
        mapped = MappedFile(tmp_path / offset_to_file_name(0), 3 * OS_PAGE_SIZE)
        mapped.view[:100] = b"\x07" * 100          # written without reserving: the page gets its block here
        mapped.wrote_position = 100
        view = mapped.append_view(200)
        assert mapped.reserved_position == OS_PAGE_SIZE
        assert bytes(view[:100]) == b"\x07" * 100 and not any(view[100:])
        before = mapped.reserved_position
        mapped.append_view(150)                   # already reserved: nothing happens
        assert mapped.reserved_position == before
        mapped.close()

    def test_preallocated_file_is_reserved_whole(self, tmp_path):
        mapped = MappedFile(tmp_path / offset_to_file_name(0), 1 << 20, preallocate=True)
        assert allocated(mapped.path) >= 1 << 20 and mapped.reserved_position == 1 << 20
        mapped.close()

    def test_truncation_gives_the_blocks_back(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 16 * OS_PAGE_SIZE)
        mapped = queue.get_writable_file()
        mapped.append_view(10 * OS_PAGE_SIZE)[:10 * OS_PAGE_SIZE] = b"\x01" * (10 * OS_PAGE_SIZE)
        mapped.wrote_position = 10 * OS_PAGE_SIZE
        assert mapped.data_end() >= 10 * OS_PAGE_SIZE
        queue.truncate_dirty_files(100)
        assert allocated(mapped.path) <= OS_PAGE_SIZE and mapped.data_end() <= OS_PAGE_SIZE
        assert bytes(mapped.view[:101]) == b"\x01" * 100 + b"\x00" and not any(mapped.view[100:])
        # Appends after the cut reserve the hole again.
        mapped.append_view(3 * OS_PAGE_SIZE)
        assert allocated(mapped.path) >= 3 * OS_PAGE_SIZE
        queue.close()


def filled_queue(path, mappings: OpenMappings, files: int) -> MappedFileQueue:
    """A queue of `files` one-page files, file i filled with byte i + 1."""
    queue = MappedFileQueue(path, OS_PAGE_SIZE, mappings=mappings)
    for i in range(files):
        mapped = queue.get_writable_file()
        mapped.append_view(OS_PAGE_SIZE)[:] = bytes([i + 1]) * OS_PAGE_SIZE
        mapped.wrote_position = OS_PAGE_SIZE
    return queue


class TestOpenMappingBound:
    def test_mappings_are_bounded_and_reopened_on_use(self, tmp_path):
        mappings = OpenMappings(3)
        queue = filled_queue(tmp_path / "q", mappings, 12)
        assert maps_of(tmp_path) <= 3 and descriptors_of(tmp_path) <= 2 * 3
        for round_number in range(2):
            for i, mapped in enumerate(queue.files):
                assert bytes(mapped.select(0, 8)) == bytes([i + 1]) * 8
                assert maps_of(tmp_path) <= 3 and descriptors_of(tmp_path) <= 2 * 3
        assert mappings.opened >= 12 + 2 * (12 - 3)    # every file came back after the bound closed it
        queue.close()
        assert maps_of(tmp_path) == 0 and descriptors_of(tmp_path) == 0

    def test_files_are_mapped_on_first_use(self, tmp_path):
        queue = filled_queue(tmp_path / "q", OpenMappings(100), 5)
        queue.close()
        again = MappedFileQueue(tmp_path / "q", OS_PAGE_SIZE, mappings=OpenMappings(100))
        again.load()
        assert len(again.files) == 5 and maps_of(tmp_path) == 0
        assert again.files[3].view[0] == 4 and maps_of(tmp_path) == 1
        again.close()

    def test_the_most_used_file_keeps_its_mapping(self, tmp_path):
        mappings = OpenMappings(4)
        queue = filled_queue(tmp_path / "q", mappings, 12)
        hot = queue.files[0]
        for mapped in queue.files[1:] * 3:
            assert hot.view[0] == 1         # used between every other use: never the one closed
            opened = mappings.opened
            assert hot.view[1] == 1 and mappings.opened == opened
            assert mapped.view[0] > 1
        queue.close()

    def test_a_reader_keeps_its_memory_when_the_bound_closes_the_mapping(self, tmp_path):
        mappings = OpenMappings(1)
        queue = filled_queue(tmp_path / "q", mappings, 3)
        held = queue.files[0].select(0, OS_PAGE_SIZE)
        assert queue.files[1].view[0] == 2 and queue.files[2].view[0] == 3   # file 0's mapping was closed
        assert bytes(held) == b"\x01" * OS_PAGE_SIZE
        assert maps_of(tmp_path) == 2       # the reader's, and the one open now
        held.release()
        assert maps_of(tmp_path) == 1
        queue.close()

    def test_concurrent_readers_and_writers_under_a_tight_bound(self, tmp_path):
        mappings = OpenMappings(2)
        queue = filled_queue(tmp_path / "q", mappings, 8)
        growing = MappedFileQueue(tmp_path / "g", 64 * OS_PAGE_SIZE, mappings=mappings)
        errors = []

        def read(seed: int) -> None:
            rng = random.Random(seed)
            try:
                for _ in range(3000):
                    i = rng.randrange(len(queue.files))
                    data = queue.files[i].select(rng.randrange(OS_PAGE_SIZE - 16), 16)
                    assert data is not None and bytes(data) == bytes([i + 1]) * 16
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)

        def write() -> None:
            try:
                for i in range(3000):
                    mapped = growing.get_writable_file()
                    mapped.append_view(mapped.wrote_position + 8)[mapped.wrote_position:mapped.wrote_position + 8] \
                        = i.to_bytes(8, "big")
                    mapped.wrote_position += 8
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=read, args=(seed,)) for seed in range(3)] + [threading.Thread(target=write)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors and not any(thread.is_alive() for thread in threads)
        view = growing.files[0].view
        assert [int.from_bytes(view[i * 8:i * 8 + 8], "big") for i in range(3000)] == list(range(3000))
        del view
        assert maps_of(tmp_path) <= 2
        queue.close()
        growing.close()

    def test_bound_must_allow_one_mapping(self):
        with pytest.raises(StoreConfigError):
            OpenMappings(0)
