"""Seq ids looked up and counted in a table, with the verdicts and messages of a sort.

Large batches of compact ids (engine counters) are checked for repeats by counting in a
table over their span; negative or widely spread ids are sorted as before. Both paths
must give the same verdict and name the same seq and positions.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from specguard import contracts
from specguard.contracts._boundaries import _id_index

DT = contracts.DraftTokens
N = 2000


def _drafts(ids: np.ndarray) -> contracts.DraftTokens:
    n = ids.shape[0]
    return DT(mtp_k=1, vocab_size=8, seq_ids=ids, draft_token_ids=np.zeros((n, 1), dtype=np.int64),
              num_drafts=np.zeros(n, dtype=np.int64))


@pytest.mark.parametrize("offset", [0, 10**12], ids=["compact", "spread"])
def test_a_repeat_in_a_large_batch_names_both_positions(offset):
    """Seq 700 at positions 3 and 1500: the same SG010 message, table or sort."""
    ids = np.random.default_rng(1).permutation(4 * N)[:N].astype(np.int64) + offset
    ids[3], ids[1500] = 700 + offset, 700 + offset
    if offset:  # a spread that no table covers: the sort decides
        ids[0] = 0
    assert (_id_index.dense_span(ids) is None) == bool(offset)
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                f"seq {700 + offset} at batch position 1500: seq id {700 + offset} appears "
                "twice (first at batch position 3)")):
        _drafts(ids)


def test_the_smallest_repeated_id_is_named_as_the_sort_would():
    """Two repeated ids: the smaller one is reported, whichever comes first."""
    ids = np.arange(N, dtype=np.int64)
    ids[10], ids[20] = 1900, 50
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape("seq id 50 appears twice")):
        _drafts(ids)


def test_a_negative_id_in_a_large_batch_is_named():
    """A negative id makes the table refuse; the sort path names it."""
    ids = np.arange(N, dtype=np.int64)
    ids[1234] = -1
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "seq -1 at batch position 1234: seq id -1 is negative")):
        _drafts(ids)


@pytest.mark.parametrize("offset", [0, 5000, 10**12])
def test_unique_large_batches_pass(offset):
    """Distinct ids pass whatever their spread."""
    ids = np.random.default_rng(2).permutation(3 * N)[:N].astype(np.int32 if not offset
                                                                  else np.int64) + offset
    assert contracts.validate(_drafts(ids), depth="full") == []


@pytest.mark.parametrize("offset", [0, 10**12])
def test_positions_of_matches_a_python_lookup(offset):
    """Every key's position, by table or by sort; None for a stranger or a repeated id."""
    ids = np.random.default_rng(3).permutation(3 * N)[:N].astype(np.int64) + offset
    if offset:
        ids[0] = 0
    keys = ids[np.random.default_rng(4).permutation(N)[:300]]
    where = {int(s): i for i, s in enumerate(ids)}
    found = _id_index.positions_of(ids, keys)
    assert found is not None
    assert found.tolist() == [where[int(k)] for k in keys]
    assert _id_index.positions_of(ids, np.array([10**13])) is None
    repeated = ids.copy()
    repeated[5] = repeated[6]
    assert _id_index.positions_of(repeated, keys[:1]) is None
