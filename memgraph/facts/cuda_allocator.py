"""PyTorch's CUDA caching allocator, as facts: its constants, its options and its size rules.

What the allocator does with a request before any caching decision: the block size
(``round_size``), the segment size a new ``cudaMalloc`` gets (``get_allocation_size``), the
bytes ``max_memory_allocated`` counts for a storage, and the settings of
``PYTORCH_CUDA_ALLOC_CONF`` that change memory use (:class:`AllocatorOptions`). The replayable
allocator itself is :mod:`memgraph.allocator.caching_model`.
"""

from __future__ import annotations

from dataclasses import dataclass

from memgraph.units import MiB

# ---------------------------------------------------------------------------------------------
# Constants. Sources: c10/core/AllocatorConfig.h (PyTorch 2.13; the same values were constexprs at
# the top of c10/cuda/CUDACachingAllocator.cpp before the config moved) and
# c10/core/AllocatorConfig.cpp.
# ---------------------------------------------------------------------------------------------

# "all sizes are rounded to at least 512 bytes" (kMinBlockSize, used by round_size).
K_MIN_BLOCK_SIZE = 512
# "largest 'small' allocation is 1 MiB" (kSmallSize, get_pool / should_split).
K_SMALL_SIZE = 1048576
# "'small' allocations are packed in 2 MiB blocks" (kSmallBuffer, get_allocation_size); also the
# page size of small-pool expandable segments (find_expandable_block).
K_SMALL_BUFFER = 2097152
# "'large' allocations may be packed in 20 MiB blocks" (kLargeBuffer; in 2.13 the configurable
# AcceleratorAllocatorConfig::large_segment_size_, default 20971520). Also the page size of
# large-pool expandable segments, the default max_non_split_rounding_size, and the minimum of
# max_split_size_mb / max_non_split_rounding_mb (parseMaxSplitSize: kLargeBuffer / kMB).
K_LARGE_BUFFER = 20971520
# "allocations between 1 and 10 MiB may use kLargeBuffer" (kMinLargeAlloc, get_allocation_size).
K_MIN_LARGE_ALLOC = 10485760
# "round up large allocations to 2 MiB" (kRoundLarge, get_allocation_size).
K_ROUND_LARGE = 2097152
# AllocatorConfig.cpp: roundup_power2_divisions has kRoundUpPowerOfTwoIntervals = 16 intervals,
# one per power of two from kRoundUpPowerOfTwoStart = 1 MiB (2**20) to 64 GiB.
K_ROUNDUP_POWER2_INTERVALS = 16
K_ROUNDUP_POWER2_START_LOG2 = 20
# max_split_size_ defaults to std::numeric_limits<size_t>::max(), i.e. "no limit".
SIZE_MAX = (1 << 64) - 1
# Address space of an expandable segment when no capacity is given (the source reserves
# 1 1/8 of cudaDeviceProp::totalGlobalMem).
DEFAULT_EXPANDABLE_ADDRESS_SPACE = 1 << 42



# ---------------------------------------------------------------------------------------------
# Options (PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF)
# ---------------------------------------------------------------------------------------------

def _is_power_of_2(v: int) -> bool:
    return v > 0 and (v & (v - 1)) == 0


# Keys CUDAAllocatorConfig / AcceleratorAllocatorConfig know that do not change how much device
# memory the native allocator reserves or hands out (threading, pinned host memory, CUDA graphs).
_IGNORED_KEYS = frozenset({
    "release_lock_on_cudamalloc", "release_lock_on_hipmalloc",
    "pinned_use_cuda_host_register", "pinned_use_hip_host_register",
    "pinned_num_register_threads", "pinned_use_background_threads",
    "pinned_reserve_segment_size_mb", "pinned_free_catch_all",
    "graph_capture_record_stream_reuse", "throw_on_cudamalloc_oom",
})


# Of those, the ones PyTorch reads with ConfigTokenizer::toBool (exactly "True"/"False") or as an integer.
# throw_on_cudamalloc_oom and graph_capture_record_stream_reuse are switches too (a flag each in
# c10/cuda/CUDAAllocatorConfig.h, torch 2.13), read as True/False like the others.
_BOOL_KEYS = frozenset({"release_lock_on_cudamalloc", "release_lock_on_hipmalloc", "pinned_use_cuda_host_register",
                        "pinned_use_hip_host_register", "pinned_use_background_threads", "throw_on_cudamalloc_oom",
                        "graph_capture_record_stream_reuse"})
_UINT_KEYS = frozenset({"pinned_num_register_threads", "pinned_reserve_segment_size_mb"})


@dataclass(frozen=True)
class AllocatorOptions:
    """The allocator settings of ``PYTORCH_CUDA_ALLOC_CONF`` that change memory use.

    ``roundup_power2_divisions`` is an int (the same divisions for every size, the legacy form)
    or a tuple of 16 ints, one per power-of-two interval from 1 MiB up (the ``[256:1,>:4]`` form).
    ``max_non_split_rounding_mb`` and ``per_process_memory_fraction`` go beyond the minimal API;
    ``garbage_collection_threshold`` is accepted but not modelled (see the module docstring).
    """

    expandable_segments: bool = False
    max_split_size_mb: float | None = None
    roundup_power2_divisions: int | tuple[int, ...] | None = None
    garbage_collection_threshold: float | None = None
    max_non_split_rounding_mb: float | None = None
    per_process_memory_fraction: float | None = None

    def __post_init__(self):
        min_mb = K_LARGE_BUFFER // MiB  # parseMaxSplitSize / parseMaxNonSplitRoundingSize
        for name in ("max_split_size_mb", "max_non_split_rounding_mb"):
            v = getattr(self, name)
            if v is not None and not v >= min_mb:
                raise ValueError(f"{name}={v!r} too small, must be >= {min_mb}")
        d = self.roundup_power2_divisions
        if isinstance(d, bool):
            raise ValueError(f"roundup_power2_divisions={d!r}: expected an int or 16 ints")
        if isinstance(d, int):
            if not _is_power_of_2(d):
                raise ValueError(f"roundup_power2_divisions={d!r}: divisions must be a power of 2")
        elif d is not None:
            d = tuple(d)
            if len(d) != K_ROUNDUP_POWER2_INTERVALS or not all(
                    isinstance(x, int) and (x == 0 or _is_power_of_2(x)) for x in d):
                raise ValueError(
                    f"roundup_power2_divisions={d!r}: expected {K_ROUNDUP_POWER2_INTERVALS} "
                    "divisions, each 0 or a power of 2")
            object.__setattr__(self, "roundup_power2_divisions", d)
        g = self.garbage_collection_threshold
        if g is not None and not 0.0 < g < 1.0:
            raise ValueError(f"garbage_collection_threshold={g!r}: must be in (0.0, 1.0)")
        f = self.per_process_memory_fraction
        if f is not None and not 0.0 <= f <= 1.0:
            raise ValueError(f"per_process_memory_fraction={f!r}: must be in [0.0, 1.0]")

    def divisions_table(self) -> list[int]:
        """Divisions per power-of-two interval, as AcceleratorAllocatorConfig stores them."""
        d = self.roundup_power2_divisions
        if d is None:
            return [0] * K_ROUNDUP_POWER2_INTERVALS
        if isinstance(d, int):
            return [d] * K_ROUNDUP_POWER2_INTERVALS
        return list(d)

    @classmethod
    def from_env_string(cls, s: str) -> "AllocatorOptions":
        """Parse a ``PYTORCH_CUDA_ALLOC_CONF`` value, e.g. ``"expandable_segments:True,max_split_size_mb:128"``.

        Follows ConfigTokenizer / parseArgs (c10/core/AllocatorConfig.{h,cpp}): ``key:value``
        pairs separated by commas, whitespace ignored, list values in brackets. Raises
        ValueError naming the bad key or value.
        """
        toks = _tokenize(s)
        kw: dict = {}
        i, n = 0, len(toks)
        while i < n:
            key = toks[i]
            if key in (",", ":", "[", "]"):
                raise ValueError(f"allocator config {s!r}: expected an option name, got {key!r}")
            if i + 2 >= n or toks[i + 1] != ":":
                raise ValueError(f"allocator config option {key!r} has no ':value'")
            i += 2
            if toks[i] == "[":
                j = i + 1
                while j < n and toks[j] != "]":
                    j += 1
                if j == n:
                    raise ValueError(f"allocator config option {key!r}: missing closing ']'")
                value: str | list[str] = toks[i + 1:j]
                i = j
            else:
                value = toks[i]
                if value in (",", ":", "]"):
                    raise ValueError(f"allocator config option {key!r} has no value")
            _parse_option(key, value, kw)
            i += 1
            if i < n:
                if toks[i] != ",":
                    raise ValueError(
                        f"allocator config option {key!r}: expected ',' after its value, "
                        f"got {toks[i]!r}")
                i += 1
        return cls(**kw)


def _tokenize(s: str) -> list[str]:
    """ConfigTokenizer: split on , : [ ] (kept as tokens) and drop whitespace."""
    toks: list[str] = []
    buf: list[str] = []
    for ch in s:
        if ch in ",:[]":
            if buf:
                toks.append("".join(buf))
                buf = []
            toks.append(ch)
        elif not ch.isspace():
            buf.append(ch)
    if buf:
        toks.append("".join(buf))
    return toks


def _to_uint(key: str, v: str) -> int:
    if not (v.isascii() and v.isdigit()):
        raise ValueError(f"allocator config option {key!r}: expected a non-negative integer, got {v!r}")
    if len(v) > 20 or int(v) >= 2**64:  # std::stoul throws out_of_range beyond an unsigned 64-bit value
        raise ValueError(f"allocator config option {key!r}: {v[:20]!r}... is out of range (at most 2**64 - 1)")
    return int(v)


def _to_float(key: str, v: str) -> float:
    try:
        return float(v)
    except ValueError:
        raise ValueError(f"allocator config option {key!r}: expected a number, got {v!r}") from None


def _parse_option(key: str, value, kw: dict) -> None:
    if isinstance(value, list) and key != "roundup_power2_divisions":
        raise ValueError(f"allocator config option {key!r} does not take a list: {value!r}")
    if key == "expandable_segments":
        # parseExpandableSegments -> ConfigTokenizer::toBool: exactly "True" or "False".
        if value not in ("True", "False"):
            raise ValueError(f"allocator config option 'expandable_segments': expected True or False, got {value!r}")
        kw["expandable_segments"] = value == "True"
    elif key in ("max_split_size_mb", "max_non_split_rounding_mb"):
        v = _to_uint(key, value)
        if v < K_LARGE_BUFFER // MiB:
            raise ValueError(
                f"allocator config option {key!r}: {v} too small, must be >= {K_LARGE_BUFFER // MiB}")
        kw[key] = v
    elif key == "garbage_collection_threshold":
        v = _to_float(key, value)
        if not 0.0 < v < 1.0:
            raise ValueError(f"allocator config option {key!r}: {value!r} must be in (0.0, 1.0)")
        kw[key] = v
    elif key == "per_process_memory_fraction":
        v = _to_float(key, value)
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"allocator config option {key!r}: {value!r} must be in [0.0, 1.0]")
        kw[key] = v
    elif key == "roundup_power2_divisions":
        kw[key] = _parse_roundup_power2_divisions(value)
    elif key == "backend":
        if value == "cudaMallocAsync":
            raise ValueError("allocator config 'backend:cudaMallocAsync' is not modelled (only the native caching allocator)")
        if value != "native":
            raise ValueError(f"allocator config option 'backend': unknown backend {value!r}")
    elif key in _IGNORED_KEYS:
        # No effect on device memory accounting, but PyTorch still parses the value and refuses a bad one
        # (CUDAAllocatorConfig / AcceleratorAllocatorConfig: ConfigTokenizer::toBool, stoul).
        if key in _BOOL_KEYS and value not in ("True", "False"):
            raise ValueError(f"allocator config option {key!r}: expected True or False, got {value!r}")
        if key in _UINT_KEYS:
            _to_uint(key, value)
    else:
        raise ValueError(f"unrecognized allocator config option {key!r}")


def _parse_roundup_power2_divisions(value) -> int | tuple[int, ...]:
    """parseRoundUpPower2Divisions: an int, or ``[MB:div, ..., >:div]`` per interval."""
    key = "roundup_power2_divisions"
    if isinstance(value, str):
        v = _to_uint(key, value)
        if not _is_power_of_2(v):
            raise ValueError(f"allocator config option {key!r}: divisions {v} must be a power of 2")
        return v
    if not value:  # "[]" sets no interval: nonsense, not the default (leave the option out for that)
        raise ValueError(f"allocator config option {key!r}: [] gives no divisions: write e.g. [256:1,512:2,>:4], "
                         "a single power of 2, or leave the option out")
    table = [0] * K_ROUNDUP_POWER2_INTERVALS
    first, last_index = True, 0
    toks = list(value)
    j = 0
    while j < len(toks):
        if j + 2 >= len(toks) or toks[j + 1] != ":":
            raise ValueError(f"allocator config option {key!r}: expected 'size:divisions' entries, got {toks!r}")
        bound, div = toks[j], _to_uint(key, toks[j + 2])
        if div != 0 and not _is_power_of_2(div):
            raise ValueError(f"allocator config option {key!r}: divisions {div} must be 0 or a power of 2")
        if bound == ">":
            for k in range(last_index + 1, K_ROUNDUP_POWER2_INTERVALS):
                table[k] = div
        else:
            b = _to_uint(key, bound)
            if not _is_power_of_2(b):
                raise ValueError(f"allocator config option {key!r}: interval {b} must be a power of 2")
            index = min(b.bit_length() - 1, K_ROUNDUP_POWER2_INTERVALS - 1)
            if first:
                for k in range(index):
                    table[k] = div
                first = False
            table[index] = div
            last_index = index
        j += 3
        if j < len(toks):
            if toks[j] != ",":
                raise ValueError(f"allocator config option {key!r}: expected ',' in {toks!r}")
            j += 1
    return tuple(table)


# ---------------------------------------------------------------------------------------------
# Size rules
# ---------------------------------------------------------------------------------------------

def roundup_power2_next_division(size: int, divisions: int) -> int:
    """CUDACachingAllocator.cpp roundup_power2_next_division (e.g. 1200 with 4 divisions -> 1280)."""
    if _is_power_of_2(size):
        return size
    power2_floor = 1 << (size.bit_length() - 1)
    power2_division = power2_floor >> (divisions.bit_length() - 1)
    if power2_division == 0:
        return power2_floor << 1
    round_size_floor = size & ~(power2_division - 1)
    return size if round_size_floor == size else round_size_floor + power2_division


def round_size(size: int, divisions_table: list[int] | None = None) -> int:
    """CUDACachingAllocator.cpp round_size: the block size a request of ``size`` bytes gets."""
    if size < K_MIN_BLOCK_SIZE:
        return K_MIN_BLOCK_SIZE
    if divisions_table is not None:
        index = size.bit_length() - 1 - K_ROUNDUP_POWER2_START_LOG2
        index = 0 if index < 0 else min(index, K_ROUNDUP_POWER2_INTERVALS - 1)
        divisions = divisions_table[index]
        if divisions > 1 and size > K_MIN_BLOCK_SIZE * divisions:
            return roundup_power2_next_division(size, divisions)
    return (size + K_MIN_BLOCK_SIZE - 1) & -K_MIN_BLOCK_SIZE


def get_allocation_size(size: int) -> int:
    """CUDACachingAllocator.cpp get_allocation_size: the segment cudaMalloc'd for a rounded request."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return (size + K_ROUND_LARGE - 1) // K_ROUND_LARGE * K_ROUND_LARGE


# ---------------------------------------------------------------------------------------------
# Allocated bytes of one storage, per target
# ---------------------------------------------------------------------------------------------

def cuda_allocated_size(nbytes: int) -> int:
    """Bytes ``max_memory_allocated`` counts for an ``nbytes`` storage: round_size's block, 0 stays 0 (no block)."""
    if nbytes == 0:
        return 0
    return (nbytes + K_MIN_BLOCK_SIZE - 1) & -K_MIN_BLOCK_SIZE


def cpu_allocated_size(nbytes: int) -> int:
    """c10's CPU allocator reports the requested size to the profiler (c10/core/CPUAllocator.cpp)."""
    return nbytes


ALLOCATED_SIZE = {"cuda": cuda_allocated_size, "cpu": cpu_allocated_size}
