"""The step tracker's per-seq memory is bounded in bytes, and forgetting is never an alarm."""

from __future__ import annotations

import re

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import StepTracker
from specguard.adapters._seq_memory import DEFAULT_MAX_BYTES, SEQ_BYTES, SeqMemory
from tests.adapters.test_step_relations import batch, verify

TOKENS = 64  # sampled tokens per seq
K_PLUS_ONE = 3  # tokens a verify row of test_step_relations emits at most (its K is 2)


def _emit(memory: SeqMemory, seq_ids: range, tokens: int = TOKENS) -> None:
    """``tokens`` sampled tokens for each seq (token ``seq_id``), in one batch of rows."""
    ids = np.asarray(seq_ids, dtype=np.int64)
    rows = np.repeat(ids[:, None], tokens, axis=1)
    memory.emitted_rows(ids, np.zeros(ids.shape[0], dtype=np.int64), rows,
                        np.full(ids.shape[0], tokens, dtype=np.int64))


def test_a_seq_costs_its_entries_and_eight_bytes_a_sampled_token():
    """The bound counts what a seq holds: SEQ_BYTES, then 8 bytes per sampled position."""
    memory = SeqMemory(fold_every=1)
    _emit(memory, range(10))
    assert memory.nbytes == 10 * (SEQ_BYTES + 8 * TOKENS)
    assert 900 <= SEQ_BYTES + 8 * TOKENS <= 1100  # about 1 KiB at 64 sampled tokens


@pytest.mark.parametrize("fold_every", [1, 4, 16])
def test_the_memory_stays_within_its_bytes_forgetting_the_least_recently_seen(fold_every):
    """Past max_bytes, the oldest seqs are forgotten whole (no resume point, no tokens),
    the most recent kept, whether records wait in the log or are folded at once."""
    per_seq = SEQ_BYTES + 8 * TOKENS
    memory = SeqMemory(fold_every=fold_every, max_bytes=5 * per_seq)
    for first in range(0, 40, 4):
        _emit(memory, range(first, first + 4))
        assert memory.nbytes <= memory.max_bytes
    assert len(memory) == 5
    fed = np.full(TOKENS, -7, dtype=np.int64)
    kept = [seq for seq in range(40) if memory.first_mismatch(seq, 0, fed) is not None]
    assert kept == list(range(35, 40))
    assert memory.ends(np.arange(35, dtype=np.int64)).tolist() == [-1] * 35


def test_a_seq_alone_larger_than_the_bound_is_not_kept():
    """A seq whose tokens exceed the whole bound is forgotten at once, never half kept."""
    memory = SeqMemory(fold_every=1, max_bytes=SEQ_BYTES + 8 * 10)
    _emit(memory, range(1), tokens=TOKENS)
    assert len(memory) == 0 and memory.nbytes == 0
    assert memory.first_mismatch(0, 0, np.full(TOKENS, 9, dtype=np.int64)) is None


def test_the_default_bound_is_sixty_four_mib():
    assert SeqMemory().max_bytes == DEFAULT_MAX_BYTES == 64 << 20


def _back_after_others(memory_bytes: int, resume_at: int) -> StepTracker:
    """Seq 7 accepts one draft at 20 (left at 22) and sits out while 20 other seqs pass
    through, one step each (more steps than the memory's log holds before it folds);
    then it comes back at ``resume_at``."""
    tracker = StepTracker(memory_bytes=memory_bytes)
    tracker.schedule(batch([7], [20]))
    tracker.verified(verify([7], [1]))
    for seq in range(100, 120):
        tracker.schedule(batch([seq], [30]))
        tracker.verified(verify([seq], [1]))
    tracker.schedule(batch([7], [resume_at]))
    return tracker


def test_a_remembered_seq_resuming_elsewhere_is_sg601():
    """With room for every seq, seq 7 coming back two positions late is named."""
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "seq 7 at batch position 0: starts at position 24, but its previous step "
                "(row -1) left it at 22")):
        _back_after_others(DEFAULT_MAX_BYTES, 24)


@pytest.mark.parametrize("resume_at", [22, 24, 5])
def test_a_forgotten_seq_is_one_never_seen_and_raises_nothing(resume_at):
    """Bounded to about two seqs, the tracker has forgotten seq 7 when it comes back: it
    is a seq never seen, so wherever it resumes (where it left off, two positions late,
    or earlier) nothing is checked against a history the tracker no longer has."""
    with contracts.checking(depth="full"):
        tracker = _back_after_others(2 * (SEQ_BYTES + 8 * (K_PLUS_ONE)), resume_at)
    assert tracker.remembered_bytes <= 2 * (SEQ_BYTES + 8 * K_PLUS_ONE)



@pytest.mark.parametrize("progress", [True, False])
def test_a_tracker_without_progress_keeps_no_resume_points(progress):
    """Only SG601 reads where a seq left off: a tracker that does not check progress (the
    relay tracker of SGLang's overlap worker, vLLM under async scheduling) keeps none."""
    tracker = StepTracker(progress=progress)
    with contracts.checking(depth="full"):
        for step in range(3):
            tracker.schedule(batch([7, 8], [20 + step, 30 + step]))
            tracker.close()
    assert (tracker.remembered_bytes > 0) is progress
