"""The job's process keeps the host memory its tensors free (runner/host_memory.py).

Each case runs in a fresh interpreter: the setting is the whole process's, and the test
session's own allocator is left as it was.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from specguard.runner import host_memory

# Three 8 MiB blocks made and freed, twenty times over: glibc gives them back to the
# kernel each time, and each time their pages fault in again.
_CHURN = textwrap.dedent("""
    import resource, sys
    import numpy as np

    def faults():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(20):
            blocks = [np.ones(1 << 20) for _ in range(3)]
            del blocks
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    faults()  # the first round sets glibc's own thresholds
    if sys.argv[1] == "keep":
        from specguard.runner.host_memory import keep_freed_memory
        assert keep_freed_memory()
    faults()
    print(faults())
""")

_GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _CHURN, mode], capture_output=True,
                          text=True, check=True)
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not _GLIBC, reason="the allocator is tuned on glibc only")
def test_freed_blocks_are_reused_instead_of_faulted_in_again():
    """Without the setting the churn faults the blocks' pages in again each round (60
    blocks made: thousands of faults, fewer than their 4 KiB pages where the kernel maps
    huge pages); with it, the blocks are reused and almost nothing faults."""
    churned = _faults("default")
    assert churned > 1000
    assert _faults("keep") < churned // 100


def test_the_setting_is_refused_off_glibc(monkeypatch):
    """Another C library or platform is left alone, and says so."""
    monkeypatch.setattr(host_memory.sys, "platform", "darwin")
    assert host_memory.keep_freed_memory() is False
    monkeypatch.setattr(host_memory.sys, "platform", "linux")
    monkeypatch.setattr(host_memory.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert host_memory.keep_freed_memory() is False
