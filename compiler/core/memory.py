"""Returning freed memory to the system between the phases of a long job."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable

__all__ = ["release_freed_memory"]


@functools.cache
def _trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, where the C library has one."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def release_freed_memory() -> None:
    """Collect garbage and hand the C heap's free pages back to the system."""
    gc.collect()
    trim = _trim()
    if trim is not None:
        trim(0)
