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


def test_the_collector_is_paused_for_a_bulk_step_and_resumed_as_it_was_even_on_an_error():
    import gc

    import pytest

    from hibug_core.native_memory import collector_paused

    assert gc.isenabled()
    with pytest.raises(ValueError):
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():  # nested: the inner one leaves it paused
                pass
            assert not gc.isenabled()
            raise ValueError("a bad file")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_a_coco_import_runs_with_the_collector_paused(tmp_path, monkeypatch):
    import gc

    from test_objects import _tide_case, _write

    from hibug_core.objects import matching
    from hibug_core.tasks import load_coco

    seen = []
    real = matching.match
    monkeypatch.setattr("hibug_core.tasks.object_import.match",
                        lambda *a, **k: seen.append(gc.isenabled()) or real(*a, **k))
    truth, results = _tide_case()
    truth_file, paths = _write(tmp_path, truth, {"m": results})
    load_coco(truth_file, paths)
    assert seen == [False] and gc.isenabled()
