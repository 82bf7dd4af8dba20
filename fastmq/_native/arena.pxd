# cython: language_level=3
"""Batch storage from one reused mapping: a buddy allocator over huge pages (see arena.pyx)."""
from libc.stdint cimport int32_t, uint8_t

cdef enum:
    ARENA_PAGE_SHIFT = 12           # the smallest block is one 4 KiB page
    ARENA_PAGE = 1 << ARENA_PAGE_SHIFT
    ARENA_MAX_ORDERS = 24           # orders 0 .. 23: blocks of 4 KiB .. 32 GiB
    ARENA_HUGE_PAGE = 1 << 21       # the mapping is aligned to (and advised into) 2 MiB pages


cdef class Arena:
    cdef char* base                     # first byte of the blocks (aligned to the top block and a huge page)
    cdef char* mapping                  # what mmap returned (base rounded down), for munmap
    cdef Py_ssize_t mapped              # bytes mapped at `mapping`
    cdef Py_ssize_t pages               # ARENA_PAGE pages the blocks span
    cdef Py_ssize_t carved              # pages handed out as top blocks so far: never touched beyond it
    cdef readonly int top_order         # the largest block is ARENA_PAGE << top_order bytes
    cdef int32_t heads[ARENA_MAX_ORDERS]   # first free block of each order (page index), -1: none
    cdef uint8_t* free_order            # by page: 1 + order of the free block starting there, 0: none
    cdef int32_t* next_free             # by page: the next free block of the same order (free list), -1: none
    cdef int32_t* prev_free             # by page: the previous one, -1: it is the head
    cdef readonly Py_ssize_t in_use     # bytes of the blocks handed out and not yet returned
    cdef readonly Py_ssize_t outside    # bytes of live blocks the arena could not serve (malloc'd instead)

    cdef char* take(self, int order) noexcept
    cdef void give_back(self, char* block, int order) noexcept
    cdef void _push(self, Py_ssize_t page, int order) noexcept
    cdef void _unlink(self, Py_ssize_t page, int order) noexcept


cdef class ArenaBlock:
    cdef Arena arena                    # where `data` comes from; the mapping lives as long as any block
    cdef char* data                     # the block's first byte
    cdef readonly Py_ssize_t capacity   # bytes at `data` (after trim(), the pages it kept)
    cdef Py_ssize_t length              # bytes a buffer export shows (the written part)
    cdef int order                      # its order in the arena, -1: malloc'd (larger than the arena serves)
    cdef Py_ssize_t exports             # live buffer exports: the block is not moved while any exists

    cdef int resize(self, Py_ssize_t capacity, Py_ssize_t keep) except -1
    cdef int trim(self) except -1
    cdef int _place(self, Py_ssize_t capacity) except -1
    cdef void _let_go(self) noexcept


cdef ArenaBlock arena_block(Arena arena, Py_ssize_t capacity)
