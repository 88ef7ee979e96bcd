"""The allocator settings for networks on CPU: a batch-sized block, freed and asked for again, comes from the heap
instead of a fresh mmap (whose pages the kernel must zero every batch)."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys
import numpy as np
from hibug_core.native_memory import reuse_freed_tensor_memory

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Info
if sys.argv[1] == "set":
    assert reuse_freed_tensor_memory() and reuse_freed_tensor_memory()
before = mallinfo2().hblks
block = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB: a batch of activations
print(mallinfo2().hblks - before)
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_batch_sized_blocks_come_from_the_heap_once_set():
    def mmapped_blocks(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.strip())

    assert mmapped_blocks("default") == 1  # glibc's default: its own mmap
    assert mmapped_blocks("set") == 0
