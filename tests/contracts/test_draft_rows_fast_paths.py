"""The vectorised builders of ``DraftTokens`` give what the row-by-row path gives.

``from_mapping`` fills clean mappings (a dict of lists, tuples or arrays keyed by the
decode seqs) with array operations, and ``from_rows`` takes a compacted ``(m, w)`` array
plus the ids of its rows. Both must equal the row-by-row fill, value for value and dtype
for dtype, and leave every problem to the reporting path.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specguard import contracts
from specguard.contracts._boundaries import _dense_rows as module

DT = contracts.DraftTokens
K, VOCAB = 3, 50


def _row_by_row(ids, drafts, placeholder=0, dtype=np.int32):
    """The reporting path's fill, called directly: (rows, counts, findings)."""
    ids = np.asarray(ids, dtype=np.int64)
    rows = np.empty((ids.shape[0], K), dtype=dtype)
    counts = np.zeros(ids.shape[0], dtype=dtype)
    fill = np.full(ids.shape[0], placeholder, dtype=np.int64)
    findings = module._fill_rows(ids, drafts, rows, counts, fill)
    return rows, counts, findings + module._strangers(ids, drafts)


@st.composite
def _mappings(draw):
    """Decode ids in a shuffled order and drafts for some of them, of 0..K ids each."""
    n = draw(st.integers(0, 12))
    ids = draw(st.permutations(list(range(100, 100 + 3 * n))))[:n]
    form = draw(st.sampled_from(["list", "tuple", "array", "mixed"]))
    uniform = draw(st.booleans())
    drafts = {}
    for seq in draw(st.permutations(ids))[: draw(st.integers(0, n))]:
        length = K if uniform else draw(st.integers(0, K))
        run = [draw(st.integers(0, VOCAB - 1)) for _ in range(length)]
        kind = draw(st.sampled_from(["list", "tuple", "array"])) if form == "mixed" else form
        drafts[seq] = {"list": run, "tuple": tuple(run),
                       "array": np.array(run, dtype=np.int64)}[kind]
    return ids, drafts


@given(_mappings(), st.sampled_from([np.int32, np.int64]))
def test_from_mapping_equals_the_row_by_row_fill(case, dtype):
    """Any clean mapping: the same rows, counts and dtypes as the row-by-row path."""
    ids, drafts = case
    rows, counts, findings = _row_by_row(ids, drafts, placeholder=7, dtype=dtype)
    assert findings == []
    built = DT.from_mapping(ids, drafts, mtp_k=K, vocab_size=VOCAB, placeholder=7, dtype=dtype)
    assert built.draft_token_ids.dtype == rows.dtype
    assert built.draft_token_ids.tolist() == rows.tolist()
    assert built.num_drafts.tolist() == counts.tolist()


@given(_mappings())
def test_from_rows_equals_from_mapping(case):
    """A compacted array plus its seq ids builds what the same rows as a mapping build."""
    ids, drafts = case
    with_rows = [seq for seq, run in drafts.items() if len(run) == K]
    rows = np.array([drafts[s] for s in with_rows], dtype=np.int64).reshape(len(with_rows), K)
    dense = DT.from_rows(np.array(ids, dtype=np.int64), rows,
                         rows_for=np.array(with_rows, dtype=np.int64), mtp_k=K,
                         vocab_size=VOCAB, placeholder=0)
    mapped = DT.from_mapping(ids, dict(zip(with_rows, rows, strict=True)), mtp_k=K,
                             vocab_size=VOCAB, placeholder=0)
    assert dense.draft_token_ids.tolist() == mapped.draft_token_ids.tolist()
    assert dense.num_drafts.tolist() == mapped.num_drafts.tolist()
    assert dense.seq_ids.tolist() == mapped.seq_ids.tolist()
    assert dense.draft_token_ids.dtype == mapped.draft_token_ids.dtype


def test_from_rows_narrower_than_mtp_k_counts_the_width():
    """Rows of width 2 under mtp_k=3 (dynamic K): 2 drafts each, the third slot filled."""
    built = DT.from_rows(np.array([5, 6, 7]), np.array([[1, 2], [3, 4]]),
                         rows_for=np.array([7, 5]), mtp_k=K, vocab_size=VOCAB, placeholder=9)
    assert built.draft_token_ids.tolist() == [[3, 4, 9], [9, 9, 9], [1, 2, 9]]
    assert built.num_drafts.tolist() == [2, 0, 2]


@pytest.mark.parametrize(("drafts", "message"), [
    ({42: [1, 2, 3, 4]}, "seq 42 at batch position 1: seq has 4 drafts (expected at most "
                         "mtp_k=3)"),
    ({42: [1.5, 2.0]}, "seq 42 at batch position 1: drafts are not 1-D integer ids"),
    ({42: [1, 2], 43: [1]}, "seq 43: has drafts but is not a decode seq of this batch"),
    ({42: b"ab"}, "seq 42 at batch position 1: drafts are not 1-D integer ids"),
    ({True: [1]}, "drafts given for key True, which is not a decode seq id of this batch"),
    ({42: [1], True: [1]}, "drafts given for key True, which is not a decode seq id of "
                           "this batch"),
])
def test_problems_take_the_reporting_path(drafts, message):
    """What the fast fill cannot vouch for is reported by rule, seq and position."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(message)):
        DT.from_mapping([40, 42, 44], drafts, mtp_k=K, vocab_size=VOCAB, placeholder=0)


def test_a_bool_key_among_int_keys_is_not_seq_1():
    """numpy would fold ``True`` into the int keys as 1: the key is reported, not read as
    the drafts of seq 1."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "drafts given for key True, which is not a decode seq id of this batch")):
        DT.from_mapping([1, 5], {True: [1, 2, 3], 5: [4, 5, 6]}, mtp_k=K, vocab_size=VOCAB,
                        placeholder=0)


def test_from_rows_reports_a_row_for_a_stranger_as_sg114():
    """A row for seq 43, not decoding here, is SG114 as in the mapping form."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG114 drafts belong to decode seqs of the batch [DraftTokens.draft_token_ids, "
            "scheduler → runner]: seq 43: has drafts but is not a decode seq of this batch")):
        DT.from_rows(np.array([40, 42]), np.array([[1, 2, 3]]), rows_for=np.array([43]),
                     mtp_k=K, vocab_size=VOCAB, placeholder=0)


def test_from_rows_reports_too_wide_rows_as_sg102():
    """Rows wider than mtp_k are SG102 naming the first seq, as in the mapping form."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 42 at batch position 1: seq has 4 drafts (expected at most mtp_k=3)")):
        DT.from_rows(np.array([40, 42]), np.array([[1, 2, 3, 4]]), rows_for=np.array([42]),
                     mtp_k=K, vocab_size=VOCAB, placeholder=0)


def test_from_rows_with_a_seq_id_per_row_missing_is_sg004():
    """Two rows for one seq id: the rows and their ids disagree, SG004."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG004 named dimensions agree across fields [DraftTokens.draft_token_ids, "
            "scheduler → runner]: 2 draft rows for i64[1] seq ids")):
        DT.from_rows(np.array([40, 42]), np.array([[1, 2, 3], [4, 5, 6]]),
                     rows_for=np.array([42]), mtp_k=K, vocab_size=VOCAB, placeholder=0)


@pytest.mark.parametrize("drafts", [
    {44: [1, 2, 3], 40: [4, 5, 6]},
    {44: np.array([1, 2, 3]), 40: np.array([4, 5, 6])},
    {44: [1], 40: (4, 5)},
    {},
])
def test_clean_mappings_never_take_the_row_by_row_path(monkeypatch, drafts):
    """The engines' clean forms are filled by array operations alone."""
    def refuse(*args):
        raise AssertionError("row-by-row fill used for a clean mapping")

    monkeypatch.setattr(module, "_fill_rows", refuse)
    built = DT.from_mapping([40, 42, 44], drafts, mtp_k=K, vocab_size=VOCAB, placeholder=0)
    assert built.num_drafts.tolist() == [len(drafts.get(s, ())) for s in (40, 42, 44)]


@pytest.mark.parametrize("run", [
    [True, False], np.array([True]), np.array([[1]]), np.array(3), [1, [2]], [2**70],
    np.array([1.0, 2.0]),
])
def test_runs_the_fast_fill_cannot_vouch_for_are_sg002(run):
    """Bools, nested or 0-d runs, huge and float ids: SG002 naming seq 42, never a guess."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG002 array has an allowed dtype [DraftTokens.draft_token_ids, scheduler → "
            "runner]: seq 42 at batch position 1: drafts are not 1-D integer ids")):
        DT.from_mapping([40, 42, 44], {40: [1, 2, 3], 42: run}, mtp_k=K, vocab_size=VOCAB,
                        placeholder=0)


def test_a_bool_run_among_uneven_runs_is_sg002():
    """Runs of uneven length with one all-bool run: SG002 on that seq, as row by row."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 44 at batch position 2: drafts are not 1-D integer ids")):
        DT.from_mapping([40, 42, 44], {40: [1, 2, 3], 42: [], 44: [True]}, mtp_k=K,
                        vocab_size=VOCAB, placeholder=0)


def test_runs_of_zeros_and_ones_are_ids():
    """Ids 0 and 1 in int runs are ids (only bool runs are refused), evenly or not."""
    even = DT.from_mapping([40, 42], {40: [0, 1, 1], 42: [1, 0, 0]}, mtp_k=K,
                           vocab_size=VOCAB, placeholder=0)
    uneven = DT.from_mapping([40, 42], {40: [0, 1], 42: [1, 0, 0]}, mtp_k=K,
                             vocab_size=VOCAB, placeholder=0)
    assert even.draft_token_ids.tolist() == [[0, 1, 1], [1, 0, 0]]
    assert uneven.draft_token_ids.tolist() == [[0, 1, 0], [1, 0, 0]]
    assert uneven.num_drafts.tolist() == [2, 3]
