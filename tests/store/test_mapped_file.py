"""MappedFile / MappedFileQueue: names, arithmetic lookup, growth, flush positions, truncation, load checks."""
from __future__ import annotations

import os

import pytest

from fastmq.store.errors import CorruptStoreError, StoreConfigError
from fastmq.store.mapped_file import MappedFile, MappedFileQueue, offset_to_file_name


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

    def test_files_are_preallocated(self, tmp_path):
        queue = MappedFileQueue(tmp_path / "q", 1 << 20)
        mapped = queue.get_writable_file()
        assert os.stat(mapped.path).st_blocks * 512 >= 1 << 20
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


def test_warm_zeroes_ahead_of_the_write_position_only(tmp_path):
    from fastmq.store import mapped_file

    path = tmp_path / offset_to_file_name(0)
    mapped = MappedFile(path, 3 * 1024 * 1024)
    try:
        mapped.view[:100] = b"\x07" * 100
        mapped.wrote_position = 100
        mapped.warm(200)
        # Warmed a whole WARM_AHEAD window (capped at the file size), without touching written bytes.
        assert mapped.warmed_position == min(mapped.file_size, 200 + mapped_file.WARM_AHEAD)
        assert bytes(mapped.view[:100]) == b"\x07" * 100
        assert bytes(mapped.view[100:4096]) == bytes(4096 - 100)
        before = mapped.warmed_position
        mapped.warm(150)                     # already warm: nothing happens
        assert mapped.warmed_position == before
    finally:
        mapped.close()
