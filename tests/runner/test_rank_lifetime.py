"""``specguard run --dp``: the rank processes die with their launcher, however it dies."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads the process table from /proc")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"  # a zombie has ended; nobody reaped it yet



@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_ranks_die_with_their_launcher(how):
    launcher = subprocess.Popen(
        [sys.executable, "-m", "specguard", "run", "--dp", "2", "--requests", "2000",
         "--max-tokens", "256", "--no-progress"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ranks: list[int] = []
    try:
        assert wait_for(lambda: len(_children(launcher.pid)) >= 2, 120), "no ranks started"
        ranks = [pid for pid in _children(launcher.pid) if _alive(pid)]
        os.kill(launcher.pid, how)
        launcher.wait(timeout=60)
        assert wait_for(lambda: not any(_alive(pid) for pid in ranks), 20), \
            f"ranks {[p for p in ranks if _alive(p)]} outlived their launcher"
    finally:
        for pid in [launcher.pid, *ranks]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        launcher.wait(timeout=30)
