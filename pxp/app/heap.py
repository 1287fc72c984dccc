"""The app server's native heap, kept from growing with transient megabyte buffers (docs/development.md, Memory
budgets)."""

from __future__ import annotations

#: glibc mallopt parameters (malloc.h): large blocks always mmapped, few thread arenas
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8
MMAP_THRESHOLD = 256 * 1024
ARENA_MAX = 2


def bound_native_heap() -> bool:
    """Keep the server's C heap from growing with transient megabyte buffers (docs/development.md, Memory budgets).

    Streamlit runs every script run in a new thread; glibc gives threads their own arenas
    (up to 8 per core) and, after the first large free, raises its mmap threshold to 32 MB, so
    each run's display PNG, its base64 copy and the serialised message (megabytes each) land in
    arenas that are fragmented and never returned: measured, RSS grew ~1 MB per submit. A fixed
    threshold of 256 KB (blocks above it are mmapped and unmapped on free) and 2 arenas stop
    that (as MALLOC_MMAP_THRESHOLD_=262144 MALLOC_ARENA_MAX=2 would). True when applied; a no-op
    off glibc.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_ARENA_MAX, ARENA_MAX))
