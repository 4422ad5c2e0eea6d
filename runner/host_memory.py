"""The engine process keeps the host memory its tensors free, as a caching allocator does.

On the CPU, torch takes each tensor's memory from the C library's ``malloc`` and gives it
back on free. glibc hands a large block back to the kernel (``munmap``, or a trim of the
heap's top) as soon as it is freed, so the next step's tensors of the same sizes fault
their pages in again: the reference engine took 2,600-5,100 minor page faults a step at
``specguard run``'s defaults, and how many moved with the heap's history, from run to run
and between two engines of one process. An engine on an accelerator has no such cost:
its caching allocator keeps freed blocks for the next step. :func:`keep_freed_memory`
makes the job's process do the same on the host (about 100 faults a step, and steps
about 15% shorter, measured on a 2-core host).

It changes the whole process's allocator, so only what owns the process calls it: the
main job (``specguard run``) and the bench's engine measurement, never the library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import sys

__all__ = ["keep_freed_memory"]

# mallopt's parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

#: Blocks up to this size come from the heap, not from a mapping of their own (glibc's
#: largest threshold on 64-bit hosts: larger blocks are mapped whatever the setting).
MMAP_THRESHOLD_BYTES = 32 * 2**20
#: Free memory the heap keeps at its top before giving any back to the kernel.
KEPT_BYTES = 256 * 2**20
#: What the heap grows by past a request, so that growing is rare.
TOP_PAD_BYTES = 64 * 2**20


def keep_freed_memory() -> bool:
    """Keep freed host memory in the process for reuse; whether it could be set.

    Only glibc's allocator is tuned (Linux); elsewhere nothing changes and it says False.
    """
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # A fixed mapping threshold also stops glibc's own adjustment of the trim threshold,
    # which would otherwise fall back to twice the largest block freed so far.
    return all(mallopt(param, value) == 1 for param, value in (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), (_M_TRIM_THRESHOLD, KEPT_BYTES),
        (_M_TOP_PAD, TOP_PAD_BYTES)))
