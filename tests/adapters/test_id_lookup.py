"""Looking up a step's seq ids: sorted once, the same answers as one id at a time."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from specguard.adapters._step_plan import IdLookup

IDS = st.lists(st.integers(0, 9), max_size=8)


def _one_by_one(reference: list[int], ids: list[int]) -> list[int]:
    """Each id's first index in the reference, or -1."""
    return [reference.index(i) if i in reference else -1 for i in ids]


@given(reference=IDS, lookups=st.lists(IDS, max_size=4), same=st.booleans())
@example(reference=[3, 1, 2], lookups=[[3, 1, 2]], same=True)
@example(reference=[3, 1, 3], lookups=[[3, 1, 3]], same=True)
@example(reference=[], lookups=[[1]], same=False)
def test_lookups_match_one_id_at_a_time(reference, lookups, same):
    """Any ids, repeated lookups of one sorted reference included, and the reference's
    own ids (the shortcut for distinct ids, not for repeated ones) give first indexes."""
    lookup = IdLookup(np.array(reference, dtype=np.int64))
    if same:
        lookups = [*lookups, list(reference)]
    for ids in lookups:
        got = lookup.rows(np.array(ids, dtype=np.int64))
        assert got.tolist() == _one_by_one(reference, ids)
        assert got.dtype == np.int64
