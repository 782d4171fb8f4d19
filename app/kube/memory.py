"""Handing freed memory back to the operating system after a relist.

A relist reads every object whole (a Job or a Pod carries the workload's spec, up to 256 KiB)
and the cache keeps it slimmed (`app.domain.kube_objects.slimmed`): most of what was read is
freed at once, but glibc's allocator keeps the freed pages of its heap when small survivors
sit between them, so a replica restarted with thousands of large workloads would stay at the
size of everything it read. `release_freed_memory` asks glibc to return every whole free page
(`malloc_trim(0)`); elsewhere (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache


@cache
def _malloc_trim() -> ctypes._NamedFuncPointer | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Return the heap's free pages to the OS (glibc only); a few milliseconds."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
