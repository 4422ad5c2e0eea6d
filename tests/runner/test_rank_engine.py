"""One rank's engine in-process, with a group of one that records its collectives."""

from __future__ import annotations

import queue
import signal

import numpy as np
import pytest
from engine_builders import chunk_boundary

from specguard import contracts
from specguard.adapters.ranks import HEADER
from specguard.runner.data_parallel import (
    CRASHED,
    FINISHED,
    HUNG,
    STOPPED,
    RankEngine,
    RankOutcome,
    _collect,
)


class RecordingGroup:
    """A group of one rank: every collective returns this rank's own contribution."""

    rank, world = 0, 1

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.rows: list[np.ndarray] = []

    def gather_counts(self, num_tokens: int, busy: bool) -> np.ndarray:
        self.calls.append("counts")
        return np.array([[num_tokens, int(busy)]], dtype=np.int64)

    def gather_rows(self, row: np.ndarray) -> np.ndarray:
        self.calls.append("rows")
        self.rows.append(row)
        return row[None, :]

    def exchange(self, hidden, padded):
        self.calls.append("exchange")
        assert hidden.shape[0] <= padded
        return hidden


def _serve(mode: str, depth: str = "metadata") -> tuple[RecordingGroup, RankEngine]:
    config, requests = chunk_boundary()
    group = RecordingGroup()
    with contracts.checking(mode=mode, depth=depth):
        engine = RankEngine(config, group)  # type: ignore[arg-type]
        engine.generate(requests)
    return group, engine


def test_contracts_off_gather_no_rows():
    """Mode off: each step gathers counts and exchanges, and gathers no metadata at all."""
    group, engine = _serve("off")
    assert "rows" not in group.calls
    assert group.calls.count("exchange") == engine.group_step
    assert engine.agreement_seconds == 0.0


@pytest.mark.parametrize("depth", ["metadata", "full"])
def test_strict_gathers_one_row_per_step_before_the_exchange(depth):
    """Strict: exactly one row gather per step, between the counts and the exchange."""
    group, engine = _serve("strict", depth)
    steps = engine.group_step
    assert group.calls[:3] == ["counts", "rows", "exchange"]
    assert group.calls.count("rows") == steps == group.calls.count("exchange")
    # The header, this rank's copy of every rank's token count, then the seq ids.
    width = len(HEADER) + group.world + (engine.config.max_num_seqs if depth == "full" else 0)
    assert {row.shape for row in group.rows} == {(width,)}
    assert [int(row[1]) for row in group.rows] == list(range(1, steps + 1))


class FakeProcess:
    """A rank process as the launcher sees it: an exit code, or None while it runs."""

    def __init__(self, exitcode: int | None) -> None:
        self.exitcode = exitcode


def test_launcher_ends_a_silent_rank_as_hung_after_the_grace_period():
    """One rank stopped, the other never reports: it is reported hung, not waited for."""
    results: queue.Queue[RankOutcome] = queue.Queue()
    results.put(RankOutcome(0, STOPPED, 3, codes=("SG101",)))
    outcomes = _collect([FakeProcess(3), FakeProcess(None)], results, grace_s=0.2)
    assert [o.status for o in outcomes] == [STOPPED, HUNG]
    assert "no report 0 s after another rank stopped" in outcomes[1].report


def test_launcher_reports_a_rank_that_died_without_a_report():
    """A rank killed by a signal (gloo's abort on a size mismatch) is named with it."""
    results: queue.Queue[RankOutcome] = queue.Queue()
    results.put(RankOutcome(1, FINISHED, 5))
    outcomes = _collect([FakeProcess(-signal.SIGABRT), FakeProcess(0)], results, grace_s=5.0)
    assert outcomes[0].status == CRASHED
    assert outcomes[0].report == "the rank process died (killed by SIGABRT) without a report"
    assert outcomes[1].status == FINISHED
