"""The step tracker's per-seq memory records whole batches exactly as one seq at a time."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from specguard import contracts
from specguard.adapters import StepPlan, StepTracker
from specguard.adapters._seq_memory import DIRECT_UP_TO, SeqMemory
from specguard.adapters._step_plan import rows_in

IDS = st.integers(0, 7)


class _OneAtATime:
    """The memory's meaning, one seq at a time: an LRU of (end, base, emitted) by id."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seqs: OrderedDict[int, list] = OrderedDict()

    def _entry(self, seq_id: int) -> list:
        entry = self.seqs.get(seq_id)
        if entry is None:
            entry = self.seqs[seq_id] = [-1, -1, {}]
            if len(self.seqs) > self.limit:
                self.seqs.popitem(last=False)
        else:
            self.seqs.move_to_end(seq_id)
        return entry

    def advance(self, ids: list[int], ends: list[int]) -> None:
        for seq_id, end in zip(ids, ends, strict=True):
            self._entry(seq_id)[0] = end

    def emitted(self, seq_id: int, position: int, tokens: list[int]) -> None:
        entry = self._entry(seq_id)
        entry[2].update({position + i: t for i, t in enumerate(tokens)})

    def end(self, seq_id: int) -> int:
        return self.seqs[seq_id][0] if seq_id in self.seqs else -1

    def first_mismatch(self, seq_id: int, start: int, fed: list[int]):
        emitted = self.seqs[seq_id][2] if seq_id in self.seqs else {}
        for i, token in enumerate(fed):
            if start + i in emitted and emitted[start + i] != token:
                return start + i, token, emitted[start + i]
        return None


_ROWS = st.lists(st.tuples(IDS, st.integers(-1, 20),
                           st.lists(st.integers(0, 9), min_size=3, max_size=3),
                           st.integers(0, 3)), max_size=5)
_OPS = st.lists(st.one_of(
    st.tuples(st.just("advance"), st.lists(st.tuples(IDS, st.integers(-1, 50)), max_size=6)),
    st.tuples(st.just("emitted"), st.tuples(IDS, st.integers(0, 20),
                                            st.lists(st.integers(0, 9), min_size=1,
                                                     max_size=4))),
    st.tuples(st.just("emitted_rows"), _ROWS),
    st.tuples(st.just("check"), st.none())), max_size=12)


def _agree(memory: SeqMemory, reference: _OneAtATime) -> None:
    """Ends, size and every emitted token of the memory are the reference's."""
    every = np.arange(8, dtype=np.int64)
    assert memory.ends(every).tolist() == [reference.end(i) for i in range(8)]
    assert len(memory) == len(reference.seqs)
    for seq_id in range(8):
        fed = np.full(24, 99, dtype=np.int64)
        assert memory.first_mismatch(seq_id, 0, fed) == reference.first_mismatch(
            seq_id, 0, fed.tolist())


def _emit_rows(memory: SeqMemory, reference: _OneAtATime, rows: list) -> None:
    """One batch of verifier rows into the memory, and row by row into the reference."""
    ids = np.array([r[0] for r in rows], dtype=np.int64).reshape(len(rows))
    positions = np.array([r[1] for r in rows], dtype=np.int64).reshape(len(rows))
    tokens = np.array([r[2] for r in rows], dtype=np.int64).reshape(len(rows), 3)
    counts = np.array([r[3] for r in rows], dtype=np.int64).reshape(len(rows))
    memory.emitted_rows(ids, positions, tokens, counts)
    for seq_id, position, row, count in rows:
        if position >= 0 and count > 0:
            reference.emitted(seq_id, position, row[:count])


@given(limit=st.integers(0, 6), fold_every=st.integers(1, 5), ops=_OPS,
       direct_up_to=st.sampled_from([0, 3, DIRECT_UP_TO]))
@example(direct_up_to=0, limit=3, fold_every=16, ops=[("advance", [(1, 5), (2, 6), (1, 7)]),
                                      ("advance", [(3, 8)]), ("advance", [(4, 9)])])
@example(direct_up_to=0, limit=3, fold_every=16, ops=[("advance", [(1, 5), (2, 6)]),
                                      ("advance", [(1, 7), (2, 1), (1, 9)]),
                                      ("advance", [(3, 8)]), ("advance", [(4, 2)])])
@example(direct_up_to=0, limit=2, fold_every=16, ops=[
    ("emitted", (1, 0, [4])), ("advance", [(2, 3), (1, 4)]), ("advance", [(3, 5), (1, 6)])])
@example(direct_up_to=0, limit=6, fold_every=4, ops=[
    ("emitted_rows", [(1, 3, [1, 2, 3], 2), (1, 4, [7, 8, 9], 3), (2, 0, [5, 5, 5], 1)]),
    ("advance", [(1, 9)]), ("check", None),
    ("emitted_rows", [(1, 0, [4, 4, 4], 1), (1, 9, [6, 6, 6], 2)]), ("check", None)])
@example(direct_up_to=0, limit=6, fold_every=16, ops=[
    ("advance", [(1, 5), (2, 6)]), ("emitted_rows", [(3, 0, [1, 1, 1], 1)]),
    ("advance", [(1, 7), (2, 8)]), ("advance", [(1, 9), (2, 10)]), ("check", None),
    ("advance", [(4, 1)]), ("advance", [(5, 1), (6, 1), (1, 2)]), ("check", None)])
def test_batch_records_match_one_seq_at_a_time(limit, fold_every, ops, direct_up_to):
    """Ends, recency (what is forgotten) and emitted tokens match the one-at-a-time meaning,
    whether records wait in the log, are folded, or (small advances) are applied at once,
    with repeated ids in a batch, rows that overwrite or leave gaps, and batches that
    overflow the limit included."""
    memory = SeqMemory(limit, fold_every=fold_every, direct_up_to=direct_up_to)
    reference = _OneAtATime(limit)
    for kind, args in ops:
        if kind == "advance":
            ids = [seq_id for seq_id, _ in args]
            ends = [end for _, end in args]
            memory.advance(np.array(ids, dtype=np.int64), np.array(ends, dtype=np.int64),
                           np.zeros(len(ids), dtype=np.int64))
            reference.advance(ids, [end if end >= 0 else -1 for end in ends])
        elif kind == "emitted":
            seq_id, position, tokens = args
            memory.emitted(seq_id, position, np.array(tokens, dtype=np.int64))
            reference.emitted(seq_id, position, tokens)
        elif kind == "emitted_rows":
            _emit_rows(memory, reference, args)
        else:
            _agree(memory, reference)
        every = np.arange(8, dtype=np.int64)  # the log answers without folding
        assert memory.ends(every).tolist() == [reference.end(i) for i in range(8)]
    _agree(memory, reference)


def _emitted_one_by_one(tracker, ids, tokens, accepted):
    """The per-row recording of emitted tokens that ``record_emitted`` does in passes."""
    plan = tracker._current.plan
    positions = rows_in(plan.seq_ids, ids)
    for row, (at, count) in enumerate(zip(positions.tolist(), accepted.tolist(), strict=True)):
        if at < 0 or not plan.is_decode[at] or not 0 <= count < tokens.shape[1]:
            continue
        start = int(plan.starts[at])
        if start >= 0:
            tracker._memory.emitted(int(ids[row]), start + 1,
                                    tokens[row, : count + 1].astype(np.int64))


@given(plan_rows=st.lists(st.tuples(st.booleans(), st.integers(-1, 9)), max_size=5),
       rows=st.lists(st.tuples(IDS, st.integers(-1, 4),
                               st.lists(st.integers(0, 9), min_size=3, max_size=3)),
                     max_size=6))
@example(plan_rows=[(True, -1)], rows=[(0, 0, [5, 6, 7])])
@example(plan_rows=[(True, 2), (False, 0)], rows=[(0, 2, [5, 6, 7]), (1, 0, [1, 2, 3])])
@example(plan_rows=[(True, 2)], rows=[(0, 1, [5, 6, 7]), (0, 0, [1, 2, 3]), (3, 0, [4, 4, 4])])
@example(plan_rows=[(True, 2)], rows=[(0, 3, [5, 6, 7]), (0, -1, [1, 2, 3])])
def test_emitted_tokens_recorded_in_passes_match_one_row_at_a_time(plan_rows, rows):
    """Rows of unknown seqs, prefill seqs, unknown starts, repeated seqs and accepted counts
    out of range are skipped or recorded exactly as one row at a time."""
    size = len(plan_rows)
    decode = np.array([d for d, _ in plan_rows], dtype=bool).reshape(size)
    plan = StepPlan(2, np.arange(size, dtype=np.int64), decode,
                    np.array([s for _, s in plan_rows], dtype=np.int64).reshape(size),
                    np.full(size, 3, dtype=np.int64),
                    np.zeros((int(decode.sum()), 2), dtype=np.int64),
                    np.full(int(decode.sum()), 2, dtype=np.int64))
    ids = np.array([i for i, _, _ in rows], dtype=np.int64).reshape(len(rows))
    accepted = np.array([a for _, a, _ in rows], dtype=np.int64).reshape(len(rows))
    tokens = np.array([t for _, _, t in rows], dtype=np.int32).reshape(len(rows), 3)
    fast, slow = StepTracker(), StepTracker()
    with contracts.checking(depth="full"):
        for tracker in (fast, slow):
            tracker.schedule(plan)
    fast.record_emitted(ids, tokens, accepted)
    _emitted_one_by_one(slow, ids, tokens, accepted)
    every = np.arange(8, dtype=np.int64)
    assert fast._memory.ends(every).tolist() == slow._memory.ends(every).tolist()
    for seq_id in range(8):
        for position in range(16):  # every emitted token, not only the first mismatch
            fed = np.full(1, 99, dtype=np.int64)
            assert fast._memory.first_mismatch(seq_id, position, fed) == \
                slow._memory.first_mismatch(seq_id, position, fed)
