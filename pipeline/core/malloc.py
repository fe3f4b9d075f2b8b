"""How much freed memory this process's C allocator keeps for reuse (glibc only).

By default glibc's malloc gives memory back to the system as soon as more than its
trim threshold lies free at the top of the heap, and serves blocks above its mmap
threshold from fresh mappings; both thresholds move with the sizes freed so far.
Extract frees every batch's rows and every 8 MB read chunk, so with the defaults the
decoding thread faults its memory in again batch after batch: about 43,000 page faults
per GB of JSONL (decoding alone: 4,000), a tenth of a second of system time per GB, and
colder caches.

Fixed thresholds keep up to :data:`TRIM_BYTES` free for reuse, so resident memory
stays within the peak plus that much, and still give every block of
:data:`MMAP_BYTES` or more its own mapping, returned when it is freed (a 256 MB line
does not stay resident after its batch).
"""

from __future__ import annotations

import ctypes
import platform
import sys

MMAP_BYTES = 16 * 1024 * 1024
TRIM_BYTES = 64 * 1024 * 1024
_M_TRIM_THRESHOLD = -1  # glibc's <malloc.h> parameter numbers
_M_MMAP_THRESHOLD = -3
_set: bool | None = None  # this process's outcome, once known


def keep_freed_memory() -> bool:
    """Set the thresholds above for this process, once; whether they are set.

    A no-op (False) where the C library is not glibc, whose ``mallopt`` this is.
    """
    global _set
    if _set is None:
        _set = _set_thresholds()
    return _set


def _set_thresholds() -> bool:
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # mallopt returns 1 on success; both are set or the defaults are left whole
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES)
    )
