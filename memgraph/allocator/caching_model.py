"""A replayable model of PyTorch's CUDA caching allocator (the "native" backend).

The engine produces the allocation and free events of an eager training step (storage sizes in
bytes, in program order). :func:`replay` pushes them through :class:`CachingAllocatorModel`, which
follows ``DeviceCachingAllocator`` in ``c10/cuda/CUDACachingAllocator.cpp`` (PyTorch 2.13, with
its constants and options in ``c10/core/AllocatorConfig.{h,cpp}``) closely enough to predict
``torch.cuda.max_memory_allocated()`` (``allocated_bytes.all.peak``) and
``torch.cuda.max_memory_reserved()`` (``reserved_bytes.all.peak``).

Modelled, rule by rule (function names are those of CUDACachingAllocator.cpp):

* ``round_size``: requests round up to kMinBlockSize (512 B) multiples, or to the next
  power-of-2 division when ``roundup_power2_divisions`` is set (``roundup_power2_next_division``).
* ``get_pool``: rounded sizes <= kSmallSize (1 MiB) go to the small pool, others to the large pool.
* ``get_allocation_size``: a new small-pool segment is kSmallBuffer (2 MiB); a large request below
  kMinLargeAlloc (10 MiB) gets a kLargeBuffer (20 MiB) segment; bigger ones round up to
  kRoundLarge (2 MiB).
* ``get_free_block``: best fit over the pool's free blocks ordered by (size, address); with
  ``max_split_size_mb`` an oversize block (>= max_split_size) is never handed to a smaller request,
  and an oversize request only takes a block smaller than ``size + max_non_split_rounding_size``
  (20 MiB unless ``max_non_split_rounding_mb`` says otherwise).
* ``should_split`` / ``alloc_found_block``: small-pool (and expandable) blocks split when at least
  512 B remain; large-pool blocks split when the request is below max_split_size and more than
  1 MiB remains. Otherwise the whole block is handed out and counted as allocated.
* ``free_block`` / ``try_merge_blocks``: a freed block merges with free neighbours of its segment
  and stays cached: reserved memory never drops on free.
* ``alloc_block`` with retries: when a device allocation would exceed ``capacity_bytes``
  the allocator runs ``release_available_cached_blocks`` (only with max_split_size set: free
  oversize cached segments, the best-fitting one or the largest ones until enough is freed) and
  then ``release_cached_blocks`` (free every cached segment that is not split; unmap every free
  page of expandable segments) before giving up with :class:`OutOfMemoryError`.
* ``per_process_memory_fraction``: ``alloc_block`` refuses when ``reserved + alloc_size`` would
  exceed ``fraction * capacity`` (the ``set_fraction`` check), before the physical check.
* Expandable segments (``expandable_segments:True``): one virtual segment per pool that is
  grown by mapping pages, 2 MiB pages (kSmallBuffer) for the small pool and 20 MiB pages
  (kLargeBuffer / ``large_segment_size``) for the large pool, as the ExpandableSegment
  constructor comment says ("2MB for small pool, 20MB for large pool"). ``find_expandable_block``,
  ``try_allocate_expandable_block``, ``map_block``, ``unmap_block`` and the "expandable size"
  tie-break of ``get_free_block`` are followed; reserved bytes are the pages mapped.
* Statistics as ``torch.cuda.memory_stats()`` keeps them: allocated bytes (sum of block sizes of
  live allocations), reserved bytes, requested bytes, segments, device allocations
  (``num_device_alloc``: cudaMalloc calls plus cuMemMap calls), retries, OOMs and inactive split
  bytes (which, as in the source, leave expandable segments out).

Simplified or not modelled (documented choices):

* One stream, no ``record_stream``: blocks are reusable as soon as they are freed, so
  ``process_events``/``insert_events`` never defer a free. Per-stream pools collapse into one.
* No CUDA graphs (private pools), no IPC, no free-memory callbacks.
* ``garbage_collection_threshold`` is accepted and validated but not modelled: in the source it
  only acts when a per-process memory fraction is set (``set_fraction``) and it frees by block
  age, which a single replay of one step does not exercise in a predictable way.
* Device addresses: cudaMalloc segments get increasing addresses from a bump pointer (the real
  driver may hand a released range back). Addresses only break ties between free blocks of the
  same size.
* ``capacity_bytes`` is the memory the allocator may reserve in total (the GPU's memory less what
  the CUDA context, other libraries and other processes hold); ``None`` means unlimited. The
  driver's own failure modes (fragmentation of physical memory) are not modelled.
* The expandable segments' virtual address space is 1 1/8 of ``capacity_bytes`` as in
  ``ExpandableSegment``'s constructor (4 TiB when the capacity is unlimited).
* ``backend:cudaMallocAsync`` is a different allocator and is rejected by the options parser.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Hashable

from memgraph.facts.cuda_allocator import (
    DEFAULT_EXPANDABLE_ADDRESS_SPACE,
    K_LARGE_BUFFER,
    K_MIN_BLOCK_SIZE,
    K_SMALL_BUFFER,
    K_SMALL_SIZE,
    SIZE_MAX,
    AllocatorOptions,
    get_allocation_size,
    round_size,
)
from memgraph.units import MiB

# Free blocks are kept per pool in a sorted list of int keys (size << _SHIFT | address), which
# orders them as BlockComparatorSize does (size, then address; one stream).
_SHIFT = 64
_ADDR_MASK = (1 << _SHIFT) - 1

# ---------------------------------------------------------------------------------------------
# Allocator state
# ---------------------------------------------------------------------------------------------

class OutOfMemoryError(MemoryError):
    """The model's ``torch.OutOfMemoryError``: no cached block and no room for a new segment."""

    def __init__(self, nbytes: int, alloc_size: int, allocated: int, reserved: int,
                 capacity: int | None):
        self.nbytes, self.alloc_size = nbytes, alloc_size
        self.allocated, self.reserved, self.capacity = allocated, reserved, capacity
        super().__init__(
            f"CUDA out of memory (model). Tried to allocate {alloc_size} bytes for a request of "
            f"{nbytes}; capacity {capacity}, allocated {allocated}, reserved {reserved}")


class _Segment:
    """One cudaMalloc (or one expandable segment's virtual range)."""
    __slots__ = ("pool", "base", "size", "expandable", "page", "mapped_bytes")

    def __init__(self, pool, base, size, expandable, page=0):
        self.pool, self.base, self.size = pool, base, size
        self.expandable, self.page, self.mapped_bytes = expandable, page, 0


class _Block:
    """CUDACachingAllocator.cpp ``Block``: a contiguous range of one segment."""
    __slots__ = ("addr", "size", "seg", "prev", "next", "allocated", "mapped", "requested")

    def __init__(self, addr, size, seg, mapped=True):
        self.addr, self.size, self.seg = addr, size, seg
        self.prev = self.next = None
        self.allocated = False
        self.mapped = mapped
        self.requested = 0


class _Pool:
    """``BlockPool``: free mapped blocks by (size, address), unmapped blocks by address."""
    __slots__ = ("is_small", "keys", "free", "unmapped_addrs", "unmapped")

    def __init__(self, is_small):
        self.is_small = is_small
        self.keys: list[int] = []
        self.free: dict[int, _Block] = {}
        self.unmapped_addrs: list[int] = []
        self.unmapped: dict[int, _Block] = {}

    def insert(self, b: _Block) -> None:
        insort(self.keys, (b.size << _SHIFT) | b.addr)
        self.free[b.addr] = b

    def remove(self, b: _Block) -> None:
        keys = self.keys
        del keys[bisect_left(keys, (b.size << _SHIFT) | b.addr)]
        del self.free[b.addr]

    def add_unmapped(self, b: _Block) -> None:
        insort(self.unmapped_addrs, b.addr)
        self.unmapped[b.addr] = b

    def remove_unmapped(self, b: _Block) -> None:
        del self.unmapped_addrs[bisect_left(self.unmapped_addrs, b.addr)]
        del self.unmapped[b.addr]


class CachingAllocatorModel:
    """Replays malloc/free of tensor storages like ``DeviceCachingAllocator`` on one device and stream.

    ``malloc(key, nbytes)`` / ``free(key)`` take any hashable id of a storage. Attributes
    ``allocated_bytes``, ``reserved_bytes``, ``peak_allocated_bytes`` and ``peak_reserved_bytes``
    are the ``allocated_bytes.all`` and ``reserved_bytes.all`` current/peak stats;
    :meth:`stats` returns these and the counters. ``malloc`` raises :class:`OutOfMemoryError`
    when the request cannot be met within ``capacity_bytes`` (``None``: unlimited).
    """

    def __init__(self, options: AllocatorOptions = AllocatorOptions(),
                 capacity_bytes: int | None = None, history: list | None = None):
        self.options = options
        # With a list: every allocator action is appended as (action, address, size, key), with
        # the action names of PyTorch's TraceEntry (c10/cuda/CUDACachingAllocator.h, torch 2.13):
        # alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map,
        # segment_unmap, oom. One stream, so every free completes at once.
        self.history = history
        self.capacity_bytes = capacity_bytes
        self._expandable = bool(options.expandable_segments)
        self._max_split = (SIZE_MAX if options.max_split_size_mb is None
                           else int(options.max_split_size_mb * MiB))
        self._max_non_split_rounding = (K_LARGE_BUFFER if options.max_non_split_rounding_mb is None
                                        else int(options.max_non_split_rounding_mb * MiB))
        table = options.divisions_table()
        self._divisions = table if any(d > 1 for d in table) else None
        # setMemoryFraction: allowed_memory_maximum = fraction * total device memory.
        self._fraction_limit = (None if options.per_process_memory_fraction is None
                                or capacity_bytes is None
                                else int(options.per_process_memory_fraction * capacity_bytes))
        self._small = _Pool(True)
        self._large = _Pool(False)
        self._live: dict[Hashable, _Block] = {}
        self._zero: set = set()
        self._next_addr = 1 << 40
        # Stats (CachingDeviceAllocator.h DeviceStats, aggregate pool).
        self.allocated_bytes = 0
        self.peak_allocated_bytes = 0
        self.reserved_bytes = 0
        self.peak_reserved_bytes = 0
        self.requested_bytes = 0
        self.peak_requested_bytes = 0
        self.num_segments = 0
        self.peak_num_segments = 0
        self.num_expandable_segments = 0
        self.inactive_split = 0
        self.inactive_split_bytes = 0
        self.peak_inactive_split_bytes = 0
        self.num_device_alloc = 0
        self.num_device_free = 0
        self.num_alloc_retries = 0
        self.num_ooms = 0
        self.num_allocations = 0  # allocation.all.allocated: malloc calls with a block

    # -- public API ---------------------------------------------------------------------------

    def round_size(self, nbytes: int) -> int:
        return round_size(nbytes, self._divisions)

    def malloc(self, key: Hashable, nbytes: int) -> None:
        if key in self._live or key in self._zero:
            raise ValueError(f"storage {key!r} is already allocated")
        if nbytes < 0:
            raise ValueError(f"negative allocation size {nbytes} for {key!r}")
        if nbytes == 0:
            # CUDACachingAllocator::allocate: `if (size != 0) malloc(...)`: no block, no stats.
            self._zero.add(key)
            return
        size = round_size(nbytes, self._divisions)
        pool = self._small if size <= K_SMALL_SIZE else self._large
        block = self._get_free_block(pool, size)
        if block is None:
            alloc_size = get_allocation_size(size)
            block = (self._alloc_block(pool, size, alloc_size, False)
                     or (self._release_available_cached_blocks(pool, size)
                         and self._alloc_block(pool, size, alloc_size, False))
                     or (self._release_cached_blocks()
                         and self._alloc_block(pool, size, alloc_size, True)))
            if not block:
                self.num_ooms += 1
                if self.history is not None:
                    self.history.append(("oom", 0, alloc_size, key))
                raise OutOfMemoryError(nbytes, alloc_size, self.allocated_bytes,
                                       self.reserved_bytes, self.capacity_bytes)
        self._alloc_found_block(key, block, pool, size, nbytes)

    def free(self, key: Hashable) -> None:
        block = self._live.pop(key, None)
        if block is None:
            if key in self._zero:
                self._zero.discard(key)
                return
            raise KeyError(f"free of unknown storage {key!r}")
        block.allocated = False
        self.allocated_bytes -= block.size
        self.requested_bytes -= block.requested
        if self.history is not None:
            self.history.append(("free_requested", block.addr, block.size, key))
            self.history.append(("free_completed", block.addr, block.size, key))
        self._free_block(block)

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()``: release_cached_blocks."""
        self._release_cached_blocks()

    def reset_peak_stats(self) -> None:
        """``torch.cuda.reset_peak_memory_stats()``: peaks drop to the current values."""
        self.peak_allocated_bytes = self.allocated_bytes
        self.peak_reserved_bytes = self.reserved_bytes
        self.peak_requested_bytes = self.requested_bytes
        self.peak_num_segments = self.num_segments
        self.peak_inactive_split_bytes = self.inactive_split_bytes

    def stats(self) -> dict:
        cached = sum(b.size for p in (self._small, self._large) for b in p.free.values())
        return {
            "allocated_bytes": self.allocated_bytes,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "reserved_bytes": self.reserved_bytes,
            "peak_reserved_bytes": self.peak_reserved_bytes,
            "requested_bytes": self.requested_bytes,
            "peak_requested_bytes": self.peak_requested_bytes,
            "active_allocations": len(self._live),
            "num_allocations": self.num_allocations,
            "num_segments": self.num_segments,
            "peak_num_segments": self.peak_num_segments,
            "num_expandable_segments": self.num_expandable_segments,
            "num_cuda_malloc": self.num_device_alloc,
            "num_cuda_free": self.num_device_free,
            "num_alloc_retries": self.num_alloc_retries,
            "num_ooms": self.num_ooms,
            "inactive_split": self.inactive_split,
            "inactive_split_bytes": self.inactive_split_bytes,
            "peak_inactive_split_bytes": self.peak_inactive_split_bytes,
            "cached_free_bytes": cached,
        }

    def snapshot(self) -> list[dict]:
        """Segments like ``torch.cuda.memory_snapshot()``: one per cudaMalloc, one per mapped
        range of an expandable segment; blocks as (size, allocated) in address order."""
        return [{**seg, "blocks": [(size, alloc) for _, size, alloc in seg["blocks"]]}
                for seg in self.segment_ranges()]

    def live_blocks(self) -> list[tuple[int, int, int, Hashable]]:
        """(address, block size, requested bytes, key) of every live allocation."""
        return [(b.addr, b.size, b.requested, k) for k, b in self._live.items()]

    def segment_ranges(self) -> list[dict]:
        """Every mapped range the allocator holds, like ``torch.cuda.memory._snapshot()["segments"]``:
        ``address``, ``total_size``, ``is_large``, ``is_expandable`` and its blocks in address order as
        (address, size, allocated)."""
        blocks = list(self._live.values())
        for p in (self._small, self._large):
            blocks.extend(p.free.values())
        heads = [b for b in blocks if b.prev is None or not b.prev.mapped]
        out = []
        for h in sorted(heads, key=lambda b: b.addr):
            b, blist = h, []
            while b is not None and b.mapped:
                blist.append((b.addr, b.size, b.allocated))
                b = b.next
            out.append({"address": h.addr, "total_size": sum(x[1] for x in blist),
                        "is_large": not h.seg.pool.is_small, "is_expandable": h.seg.expandable, "blocks": blist})
        return out

    # -- malloc internals ---------------------------------------------------------------------

    def _get_free_block(self, pool: _Pool, size: int):
        keys = pool.keys
        i = bisect_left(keys, size << _SHIFT)
        n = len(keys)
        if i == n:
            return None
        free = pool.free
        blk = free[keys[i] & _ADDR_MASK]
        if blk.seg.expandable:
            # "for the purposes of 'best fit' we consider its size to be the size it can expand
            # to": skip to bigger blocks while their expandable size is smaller.
            nxt = blk.next
            cur = blk.size + (nxt.size if nxt is not None and not nxt.mapped else 0)
            while i + 1 < n:
                nb = free[keys[i + 1] & _ADDR_MASK]
                nn = nb.next
                es = nb.size + (nn.size if nn is not None and not nn.mapped else 0)
                if es < cur:
                    i += 1
                    blk, cur = nb, es
                else:
                    break
        max_split = self._max_split
        # "Do not return an oversized block for a large request"
        if size < max_split and blk.size >= max_split:
            return None
        # "Allow oversized block size to be rounded up but within a limit"
        if size >= max_split and blk.size >= size + self._max_non_split_rounding:
            return None
        del keys[i]
        del free[blk.addr]
        return blk

    def _alloc_found_block(self, key, block: _Block, pool: _Pool, size: int, nbytes: int) -> None:
        remaining = block.size - size
        if pool.is_small or self._expandable:  # should_split
            split = remaining >= K_MIN_BLOCK_SIZE
        else:
            split = size < self._max_split and remaining > K_SMALL_SIZE
        already_split = block.prev is not None or block.next is not None
        expandable = block.seg.expandable
        if split:
            new = _Block(block.addr, size, block.seg)
            prev = block.prev
            new.prev = prev
            if prev is not None:
                prev.next = new
            new.next = block
            block.prev = new
            block.addr += size
            block.size = remaining
            pool.insert(block)
            if not expandable:
                if already_split:
                    # "An already-split inactive block is being shrunk by size bytes."
                    self.inactive_split_bytes -= size
                else:
                    # "A new split inactive block is being created from a previously unsplit block"
                    self.inactive_split_bytes += remaining
                    self.inactive_split += 1
                    if self.inactive_split_bytes > self.peak_inactive_split_bytes:
                        self.peak_inactive_split_bytes = self.inactive_split_bytes
            block = new
        elif already_split and not expandable:
            # "An already-split block is becoming active"
            self.inactive_split_bytes -= block.size
            self.inactive_split -= 1
        block.allocated = True
        block.requested = nbytes
        self._live[key] = block
        if self.history is not None:
            self.history.append(("alloc", block.addr, block.size, key))
        self.num_allocations += 1
        self.allocated_bytes += block.size
        if self.allocated_bytes > self.peak_allocated_bytes:
            self.peak_allocated_bytes = self.allocated_bytes
        self.requested_bytes += nbytes
        if self.requested_bytes > self.peak_requested_bytes:
            self.peak_requested_bytes = self.requested_bytes

    def _alloc_block(self, pool: _Pool, size: int, alloc_size: int, is_retry: bool):
        if is_retry:
            self.num_alloc_retries += 1
        if self._fraction_limit is not None and self.reserved_bytes + alloc_size > self._fraction_limit:
            return None  # set_fraction && total_allocated_memory + size > allowed_memory_maximum
        if self._expandable:
            return self._try_allocate_expandable_block(pool, size)
        if self.capacity_bytes is not None and self.reserved_bytes + alloc_size > self.capacity_bytes:
            return None  # cudaMalloc -> cudaErrorMemoryAllocation
        seg = _Segment(pool, self._next_addr, alloc_size, False)
        self._next_addr += alloc_size
        self.reserved_bytes += alloc_size
        if self.reserved_bytes > self.peak_reserved_bytes:
            self.peak_reserved_bytes = self.reserved_bytes
        self.num_segments += 1
        if self.num_segments > self.peak_num_segments:
            self.peak_num_segments = self.num_segments
        self.num_device_alloc += 1
        seg.mapped_bytes = alloc_size
        if self.history is not None:
            self.history.append(("segment_alloc", seg.base, alloc_size, None))
        return _Block(seg.base, alloc_size, seg)

    # -- free internals -----------------------------------------------------------------------

    def _free_block(self, block: _Block) -> None:
        pool = block.seg.pool
        net_blocks = net_size = 0
        for cand in (block.prev, block.next):
            subsumed = self._try_merge(block, cand, pool)
            if subsumed:
                net_blocks -= 1
                net_size -= subsumed
        pool.insert(block)
        if block.prev is not None or block.next is not None:
            net_blocks += 1
            net_size += block.size
        if not block.seg.expandable:
            # "we simply just exclude expandable segments from inactive_split"
            self.inactive_split += net_blocks
            self.inactive_split_bytes += net_size
            if self.inactive_split_bytes > self.peak_inactive_split_bytes:
                self.peak_inactive_split_bytes = self.inactive_split_bytes

    @staticmethod
    def _try_merge(dst: _Block, src, pool: _Pool) -> int:
        """try_merge_blocks: fold free neighbour ``src`` into ``dst`` (dst not in the pool)."""
        if src is None or src.allocated or src.mapped != dst.mapped:
            return 0
        if src.mapped:
            pool.remove(src)
        else:
            pool.remove_unmapped(src)
        if dst.prev is src:
            dst.addr = src.addr
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
        else:
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        dst.size += src.size
        return src.size

    # -- release (retry path, empty_cache) ----------------------------------------------------

    def _release_available_cached_blocks(self, pool: _Pool, size: int) -> bool:
        """Free oversize cached segments (only with max_split_size set; never expandable ones)."""
        if self._max_split == SIZE_MAX or self._expandable:
            return False
        max_split = self._max_split
        key_size = size if size >= max_split else max_split
        keys = pool.keys
        i = bisect_left(keys, key_size << _SHIFT)
        if i == len(keys):
            # "No single block is large enough; free multiple oversize blocks, starting with
            # the largest"
            if i == 0:
                return False
            total = 0
            i -= 1
            while total < key_size and i >= 0:
                blk = pool.free[keys[i] & _ADDR_MASK]
                if blk.size < max_split or blk.prev is not None or blk.next is not None:
                    break
                total += blk.size
                self._release_block(blk)
                i -= 1
            return total >= key_size
        blk = pool.free[keys[i] & _ADDR_MASK]
        if blk.prev is not None or blk.next is not None:
            return False  # cannot happen: blocks >= max_split_size are never split
        self._release_block(blk)
        return True

    def _release_cached_blocks(self) -> bool:
        """release_cached_blocks -> release_blocks(large), release_blocks(small)."""
        for pool in (self._large, self._small):
            to_unmap = []
            for k in list(pool.keys):
                blk = pool.free[k & _ADDR_MASK]
                if blk.seg.expandable:
                    to_unmap.append(blk)
                elif blk.prev is None and blk.next is None:
                    self._release_block(blk)
            for blk in to_unmap:
                self._unmap_block(blk)
                if blk.prev is None and blk.next is None and not blk.mapped:
                    pool.remove_unmapped(blk)  # release_expandable_segment
                    self.num_expandable_segments -= 1
                    self.num_segments -= 1
        return True

    def _release_block(self, blk: _Block) -> None:
        """release_block: cudaFree a whole cached segment."""
        blk.seg.pool.remove(blk)
        if self.history is not None:
            self.history.append(("segment_free", blk.addr, blk.size, None))
        self.reserved_bytes -= blk.size
        self.num_segments -= 1
        self.num_device_free += 1

    # -- expandable segments ------------------------------------------------------------------

    def _find_expandable_block(self, pool: _Pool, size: int) -> _Block:
        """Lowest-address free+unmapped run with ``size`` bytes of room, else a new segment."""
        for addr in pool.unmapped_addrs:
            c = pool.unmapped[addr]
            p = c.prev
            if p is not None and not p.allocated:
                c = p
            b, room = c, 0
            while room < size and b is not None and not b.allocated:
                room += b.size
                b = b.next
            if room >= size:
                return c
        page = K_SMALL_BUFFER if pool.is_small else K_LARGE_BUFFER
        cap = self.capacity_bytes
        space = cap + cap // 8 if cap else DEFAULT_EXPANDABLE_ADDRESS_SPACE
        max_handles = -(-space // page)
        base = -(-self._next_addr // page) * page
        seg = _Segment(pool, base, max_handles * page, True, page)
        self._next_addr = base + seg.size
        cand = _Block(base, seg.size, seg, mapped=False)
        pool.add_unmapped(cand)
        self.num_expandable_segments += 1
        self.num_segments += 1
        if self.num_segments > self.peak_num_segments:
            self.peak_num_segments = self.num_segments
        return cand

    def _try_allocate_expandable_block(self, pool: _Pool, size: int):
        c = self._find_expandable_block(pool, size)
        if not c.mapped and not self._map_block(c, min(c.size, size)):
            return None
        while c.size < size:
            # invariant: free -> unmapped -> *; map some of the unmapped run, merged into c
            nc = c.next
            if not self._map_block(nc, min(size - c.size, nc.size)):
                return None
            c = nc
        pool.remove(c)
        return c

    def _map_block(self, to_map: _Block, size: int) -> bool:
        seg = to_map.seg
        page = seg.page
        off = to_map.addr - seg.base
        begin = off // page
        end = -(-(off + size) // page)
        mapped = (end - begin) * page
        if self.capacity_bytes is not None and self.reserved_bytes + mapped > self.capacity_bytes:
            return False  # cuMemCreate -> CUDA_ERROR_OUT_OF_MEMORY
        pool = seg.pool
        pool.remove_unmapped(to_map)
        if self.history is not None:
            self.history.append(("segment_map", seg.base + begin * page, mapped, None))
        to_map.mapped = True
        if mapped < to_map.size:
            rem = _Block(to_map.addr + mapped, to_map.size - mapped, seg, mapped=False)
            rem.prev, rem.next = to_map, to_map.next
            if rem.next is not None:
                rem.next.prev = rem
            to_map.next = rem
            pool.add_unmapped(rem)
            to_map.size = mapped
        self._try_merge(to_map, to_map.prev, pool)
        self._try_merge(to_map, to_map.next, pool)
        pool.insert(to_map)
        seg.mapped_bytes += mapped
        self.reserved_bytes += mapped
        if self.reserved_bytes > self.peak_reserved_bytes:
            self.peak_reserved_bytes = self.reserved_bytes
        self.num_device_alloc += 1
        return True

    def _unmap_block(self, block: _Block) -> None:
        """unmap_block: unmap the whole pages inside a free expandable block."""
        seg = block.seg
        page = seg.page
        off = block.addr - seg.base
        begin = -(-off // page)
        end = (off + block.size) // page
        if begin >= end:
            return
        pool = seg.pool
        pool.remove(block)
        uaddr = seg.base + begin * page
        usize = (end - begin) * page
        if self.history is not None:
            self.history.append(("segment_unmap", uaddr, usize, None))
        before = uaddr - block.addr
        if before > 0:
            bf = _Block(block.addr, before, seg)
            bf.prev, bf.next = block.prev, block
            if bf.prev is not None:
                bf.prev.next = bf
            block.prev = bf
            pool.insert(bf)
        after = block.size - before - usize
        if after > 0:
            af = _Block(uaddr + usize, after, seg)
            af.prev, af.next = block, block.next
            if af.next is not None:
                af.next.prev = af
            block.next = af
            pool.insert(af)
        block.addr, block.size, block.mapped = uaddr, usize, False
        self._try_merge(block, block.prev, pool)
        self._try_merge(block, block.next, pool)
        pool.add_unmapped(block)
        seg.mapped_bytes -= usize
        self.reserved_bytes -= usize
        self.num_device_free += 1


