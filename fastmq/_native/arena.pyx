# cython: language_level=3
"""Batch storage from one reused mapping: a producer's batches are written into blocks of an Arena.

Why: over a thousand partitions, every append writes into another batch, each in storage of its own. Fresh
storage from malloc costs a page fault and the kernel's zeroing for each 4 KiB of it, batch after batch (glibc
hands large freed blocks back to the kernel), and a thousand batches' tails on a thousand 4 KiB pages miss the
TLB at nearly every append. The arena is one anonymous mapping, aligned to and advised into 2 MiB pages
(MADV_HUGEPAGE), whose blocks are reused and never given back while it lives: after warm-up nothing faults, and
one TLB entry covers 512 pages' worth of batches.

Blocks are a buddy system over 4 KiB pages: a block of order k is 4 KiB << k bytes, aligned to its size; a
request is rounded up to the next order, so a buffer that doubles as it grows fills its blocks exactly. A free
block is split into halves to serve a smaller order, and merges with its free buddy when given back, so a batch
that moved to a larger block leaves room a whole block's worth for the next one. Space the arena never handed
out (beyond `carved`) is never touched: only the working set becomes resident. The free lists live outside the
blocks (arrays by page), so that keeping them touches no block.

An ArenaBlock is one block as a Python object: it exports its written part through the buffer protocol
(writable), moves to a larger block as its buffer grows (resize), gives back the pages past its bytes once they
are final (trim: a finished batch waiting for the broker), and returns its memory to the arena when the
object dies, i.e. once nothing (a batch, a queued write, a user's view) refers to it any more: storage is never
reused while anything can still read it. A block larger than the arena's largest, or one the arena has no room
for, is malloc'd instead (counted in `outside`): the arena makes blocks cheap, never makes them fail.

Every operation runs under the GIL and calls no Python code, so the lists need no lock of their own.
"""
cimport cython
from libc.stdint cimport int32_t, uint8_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy
from cpython.buffer cimport PyBuffer_FillInfo

cdef extern from "<sys/mman.h>" nogil:
    void* mmap(void* addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void* addr, size_t length)
    int madvise(void* addr, size_t length, int advice)
    int PROT_READ, PROT_WRITE, MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE
    void* MAP_FAILED
    int MADV_HUGEPAGE


cdef inline int order_for(Py_ssize_t capacity) noexcept nogil:
    # The smallest order whose blocks hold `capacity` bytes.
    cdef int order = 0
    cdef Py_ssize_t block = ARENA_PAGE
    while block < capacity:
        block <<= 1
        order += 1
    return order


@cython.final
cdef class Arena:
    """Blocks of 4 KiB << order bytes from one mapping of at least `size` bytes whose largest blocks hold
    `largest` bytes (see the module docstring)."""

    def __cinit__(self, Py_ssize_t size, Py_ssize_t largest):
        cdef Py_ssize_t top_bytes, align, k
        cdef void* mapped
        self.top_order = order_for(max(largest, ARENA_PAGE))
        if self.top_order >= ARENA_MAX_ORDERS:
            raise ValueError(f"arena blocks of {largest} bytes are too large")
        top_bytes = <Py_ssize_t>ARENA_PAGE << self.top_order
        size = (max(size, top_bytes) + top_bytes - 1) // top_bytes * top_bytes
        align = max(top_bytes, <Py_ssize_t>ARENA_HUGE_PAGE)
        # Mapped with room to align the blocks, and not reserved against the commit limit: only what is written
        # becomes resident.
        mapped = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if mapped == MAP_FAILED:
            raise MemoryError(f"could not map {size + align} bytes for the producer's batches")
        self.mapping = <char*>mapped
        self.mapped = size + align
        self.base = <char*>((<uintptr_t>mapped + align - 1) // align * align)
        madvise(self.base, size, MADV_HUGEPAGE)     # advice only: without THP the blocks are 4 KiB pages
        self.pages = size >> ARENA_PAGE_SHIFT
        self.free_order = <uint8_t*>calloc(self.pages, sizeof(uint8_t))
        self.next_free = <int32_t*>malloc(self.pages * sizeof(int32_t))
        self.prev_free = <int32_t*>malloc(self.pages * sizeof(int32_t))
        if self.free_order == NULL or self.next_free == NULL or self.prev_free == NULL:
            raise MemoryError()
        for k in range(ARENA_MAX_ORDERS):
            self.heads[k] = -1

    def __dealloc__(self):
        if self.mapping != NULL:
            munmap(self.mapping, self.mapped)
        free(self.free_order)
        free(self.next_free)
        free(self.prev_free)

    @property
    def size(self):
        """Bytes the blocks may span."""
        return self.pages << ARENA_PAGE_SHIFT

    @property
    def touched(self):
        """Bytes of the mapping ever handed out (the most it has made resident)."""
        return self.carved << ARENA_PAGE_SHIFT

    @property
    def largest(self):
        """Bytes of the largest block it serves."""
        return <Py_ssize_t>ARENA_PAGE << self.top_order

    def free_blocks(self):
        """[(offset, bytes)] of the free blocks, by order then list position (for tests)."""
        cdef Py_ssize_t page
        cdef int k
        out = []
        for k in range(self.top_order + 1):
            page = self.heads[k]
            while page >= 0:
                out.append((page << ARENA_PAGE_SHIFT, <Py_ssize_t>ARENA_PAGE << k))
                page = self.next_free[page]
        return out

    cdef void _push(self, Py_ssize_t page, int order) noexcept:
        # Most recently freed first: its lines are likeliest still cached.
        cdef int32_t head = self.heads[order]
        self.free_order[page] = <uint8_t>(order + 1)
        self.next_free[page] = head
        self.prev_free[page] = -1
        if head >= 0:
            self.prev_free[head] = <int32_t>page
        self.heads[order] = <int32_t>page

    cdef void _unlink(self, Py_ssize_t page, int order) noexcept:
        cdef int32_t after = self.next_free[page], before = self.prev_free[page]
        self.free_order[page] = 0
        if before >= 0:
            self.next_free[before] = after
        else:
            self.heads[order] = after
        if after >= 0:
            self.prev_free[after] = before

    cdef char* take(self, int order) noexcept:
        # A free block of `order`, split off a larger one or carved from untouched space; NULL when none is left.
        cdef int k = order
        cdef Py_ssize_t page
        if order > self.top_order:
            return NULL
        while k <= self.top_order and self.heads[k] < 0:
            k += 1
        if k <= self.top_order:
            page = self.heads[k]
            self._unlink(page, k)
        elif self.carved + (1 << self.top_order) <= self.pages:
            k = self.top_order
            page = self.carved
            self.carved += 1 << k
        else:
            return NULL
        while k > order:
            k -= 1
            self._push(page + (1 << k), k)      # the upper half stays free
        self.in_use += <Py_ssize_t>ARENA_PAGE << order
        return self.base + (page << ARENA_PAGE_SHIFT)

    cdef void give_back(self, char* block, int order) noexcept:
        cdef Py_ssize_t page = (block - self.base) >> ARENA_PAGE_SHIFT
        cdef Py_ssize_t buddy
        self.in_use -= <Py_ssize_t>ARENA_PAGE << order
        while order < self.top_order:
            buddy = page ^ (1 << order)
            if buddy >= self.carved or self.free_order[buddy] != order + 1:
                break
            self._unlink(buddy, order)
            page = min(page, buddy)
            order += 1
        self._push(page, order)

    def block(self, Py_ssize_t capacity) -> ArenaBlock:
        """A block of at least `capacity` bytes (for tests and Python callers)."""
        return arena_block(self, capacity)


cdef ArenaBlock arena_block(Arena arena, Py_ssize_t capacity):
    # A block of at least `capacity` bytes from `arena` (malloc'd when the arena cannot serve it).
    cdef ArenaBlock block = ArenaBlock.__new__(ArenaBlock)
    block.arena = arena
    block.order = -1
    block._place(max(capacity, 1))
    return block


cdef inline void _return_block(Arena arena, char* data, int order, Py_ssize_t capacity) noexcept:
    # Gives a block's memory back: to the arena, or to malloc (order -1). A trimmed block (capacity short of its
    # order's size, see trim()) holds the blocks of its pages' binary decomposition, largest first: each aligned
    # to its size, so each merges with its buddy as any block does, and the whole comes back together.
    cdef Py_ssize_t pages = capacity >> ARENA_PAGE_SHIFT, at = 0
    cdef int k
    if order < 0:
        arena.outside -= capacity
        free(data)
    elif pages == (<Py_ssize_t>1 << order):
        arena.give_back(data, order)
    else:
        for k in range(order - 1, -1, -1):
            if pages & (<Py_ssize_t>1 << k):
                arena.give_back(data + (at << ARENA_PAGE_SHIFT), k)
                at += <Py_ssize_t>1 << k


@cython.final
@cython.no_gc       # refers to its Arena alone, which refers to nothing
cdef class ArenaBlock:
    """One block of an Arena, exporting its first `length` bytes (see the module docstring)."""

    def __init__(self):
        # Only arena_block() (Arena.block()) makes one with memory behind it: it does not run __init__.
        raise TypeError("an ArenaBlock comes from Arena.block()")

    def __dealloc__(self):
        self._let_go()

    cdef int _place(self, Py_ssize_t capacity) except -1:
        # Takes a block of at least `capacity` bytes (it has none now).
        cdef int order = order_for(capacity)
        cdef char* data = self.arena.take(order)
        if data != NULL:
            self.order = order
            self.capacity = <Py_ssize_t>ARENA_PAGE << order
        else:
            data = <char*>malloc(capacity)
            if data == NULL:
                raise MemoryError()
            self.order = -1
            self.capacity = capacity
            self.arena.outside += capacity
        self.data = data
        return 0

    cdef void _let_go(self) noexcept:
        if self.data != NULL:
            _return_block(self.arena, self.data, self.order, self.capacity)
        self.data = NULL
        self.capacity = 0

    cdef int resize(self, Py_ssize_t capacity, Py_ssize_t keep) except -1:
        # Moves to a block of at least `capacity` bytes, keeping the first `keep`: as realloc, between orders.
        cdef char* old_data = self.data
        cdef int old_order = self.order
        cdef Py_ssize_t old_capacity = self.capacity
        if self.exports:
            raise BufferError("an ArenaBlock cannot move while a view of it is alive")
        if capacity <= self.capacity:
            return 0
        self.data = NULL
        try:
            self._place(capacity)
        except MemoryError:
            self.data, self.order, self.capacity = old_data, old_order, old_capacity
            raise
        memcpy(self.data, old_data, min(keep, old_capacity))
        _return_block(self.arena, old_data, old_order, old_capacity)
        return 0

    cdef int trim(self) except -1:
        # Gives the arena back the whole pages past the written part, for a block whose bytes are final (a
        # finished batch, waiting to be sent and acknowledged): a batch of 20 KiB held a 32 KiB block, and over
        # many partitions the batches waiting for the broker are most of the producer's memory, which is fresh
        # memory (zeroed by the kernel at its first touch) as long as the arena grows. The pages past the first
        # `length` bytes go back as the blocks that tile them (each aligned to its size); they serve the next
        # batches' first, smaller blocks. Once only: the block keeps its pages until it dies.
        cdef Py_ssize_t total, keep, at
        cdef int k
        if self.order <= 0 or self.capacity != (<Py_ssize_t>ARENA_PAGE << self.order):
            return 0                        # one page, malloc'd, or trimmed already
        total = <Py_ssize_t>1 << self.order
        keep = max(1, (self.length + ARENA_PAGE - 1) >> ARENA_PAGE_SHIFT)
        at = keep
        while at < total:
            k = 0
            while not (at >> k) & 1:        # the largest block aligned at `at`: it ends within the block
                k += 1
            self.arena.give_back(self.data + (at << ARENA_PAGE_SHIFT), k)
            at += <Py_ssize_t>1 << k
        self.capacity = keep << ARENA_PAGE_SHIFT
        return 0

    def trimmed(self) -> ArenaBlock:
        """trim() for Python callers (tests): returns the block."""
        self.trim()
        return self

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.data, self.length, 0, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self.exports -= 1

    def __len__(self):
        return self.length

    @property
    def address(self):
        """Where its bytes are (for tests: which memory was reused)."""
        return <uintptr_t>self.data

    @property
    def in_arena(self):
        """False for a block the arena could not serve (malloc'd)."""
        return self.order >= 0
