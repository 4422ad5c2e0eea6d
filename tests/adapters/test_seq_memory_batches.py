"""The step tracker's per-seq memory records whole batches exactly as one seq at a time."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from specguard.adapters._seq_memory import SeqMemory

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


_OPS = st.lists(st.one_of(
    st.tuples(st.just("advance"), st.lists(st.tuples(IDS, st.integers(-1, 50)), max_size=6)),
    st.tuples(st.just("emitted"), st.tuples(IDS, st.integers(0, 20),
                                            st.lists(st.integers(0, 9), min_size=1,
                                                     max_size=4)))), max_size=12)


@given(limit=st.integers(0, 6), ops=_OPS)
@example(limit=3, ops=[("advance", [(1, 5), (2, 6), (1, 7)]), ("advance", [(3, 8)]),
                       ("advance", [(4, 9)])])
@example(limit=3, ops=[("advance", [(1, 5), (2, 6)]), ("advance", [(1, 7), (2, 1), (1, 9)]),
                       ("advance", [(3, 8)]), ("advance", [(4, 2)])])
@example(limit=2, ops=[("emitted", (1, 0, [4])), ("advance", [(2, 3), (1, 4)]),
                       ("advance", [(3, 5), (1, 6)])])
def test_batch_records_match_one_seq_at_a_time(limit, ops):
    """Ends, recency (what is forgotten) and emitted tokens match the one-at-a-time meaning,
    with repeated ids in a batch and batches that overflow the limit included."""
    memory, reference = SeqMemory(limit), _OneAtATime(limit)
    for kind, args in ops:
        if kind == "advance":
            ids = [seq_id for seq_id, _ in args]
            ends = [end for _, end in args]
            memory.advance(np.array(ids, dtype=np.int64), np.array(ends, dtype=np.int64),
                           np.zeros(len(ids), dtype=np.int64))
            reference.advance(ids, [end if end >= 0 else -1 for end in ends])
        else:
            seq_id, position, tokens = args
            memory.emitted(seq_id, position, np.array(tokens, dtype=np.int64))
            reference.emitted(seq_id, position, tokens)
        every = np.arange(8, dtype=np.int64)
        assert memory.ends(every).tolist() == [reference.end(i) for i in range(8)]
        assert len(memory) == len(reference.seqs)
        for seq_id in range(8):
            fed = np.full(24, 99, dtype=np.int64)
            assert memory.first_mismatch(seq_id, 0, fed) == reference.first_mismatch(
                seq_id, 0, fed.tolist())
