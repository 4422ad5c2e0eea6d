"""Warn mode logs each distinct violation once and counts its repeats."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from specguard import contracts


def _broken(num_seqs: int = 3) -> None:
    contracts.DrafterOutput(mtp_k=2, vocab_size=8, seq_ids=np.arange(num_seqs),
                            draft_token_ids=np.zeros((2, 2), dtype=np.int64))


@pytest.fixture
def warn_log(caplog):
    """Warn mode, with specguard's log lines captured."""
    caplog.set_level(logging.WARNING, logger="specguard")
    with contracts.checking(mode="warn"):
        yield caplog


def test_hundred_identical_violations_give_three_lines_and_keep_the_count(warn_log):
    """The first in full, then one line at the 10th and 100th; every one is counted."""
    for _ in range(100):
        _broken()
    lines = [r.getMessage() for r in warn_log.records]
    assert len(lines) == 3
    assert lines[0].startswith("specguard: SG105 one entry per seq in every per-seq array")
    assert lines[1] == ("specguard: SG105 on DrafterOutput.draft_token_ids seen 10 times "
                        "(repeats are counted, not logged; next line at 100)")
    assert lines[2].startswith("specguard: SG105 on DrafterOutput.draft_token_ids seen 100 times")
    assert contracts.STATS.violations == 100
    assert contracts.STATS.repeats_not_logged == 97


def test_a_different_violation_is_logged_in_full(warn_log):
    """Another rule, object or position is not a repeat: it gets its own full line."""
    _broken()
    _broken()
    with contracts.checking(depth="full"):
        contracts.DrafterOutput(mtp_k=2, vocab_size=8, seq_ids=np.array([0, 0]),
                                draft_token_ids=np.zeros((2, 2), dtype=np.int64))
    full = [r.getMessage() for r in warn_log.records if "seen" not in r.getMessage()]
    assert len(full) == 2
    assert "SG105" in full[0] and "SG010" in full[1]


def test_listeners_hear_every_repeat(warn_log):
    """Rate limiting is for the log only: a listener still receives each violation."""
    heard: list[contracts.Violation] = []
    with contracts.listening(heard.extend):
        for _ in range(5):
            _broken()
    assert len(heard) == 5
    assert len(warn_log.records) == 1
