"""The ATOM adapter: ATOM's own ScheduledBatch, read by duck typing, against the contracts."""

from __future__ import annotations

import re

import numpy as np
import pytest
from atom_engine import (
    BLOCK_SIZE,
    VOCAB,
    after_decode,
    after_prefill,
    decode_batch,
    prefill_batch,
    sequence,
)

from specguard import contracts
from specguard.adapters import AtomView, StepTracker

K = 3


def _view(tracker: StepTracker | None = None, layout: str = "pr1771") -> AtomView:
    return AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE, tracker=tracker,
                    layout=layout)


def _seed_seqs() -> list:
    """128 decode seqs; the last has just left prefill and has no drafts yet."""
    return [sequence(i, 40, drafts=K) for i in range(127)] + [sequence(127, 40)]


def test_dense_rows_pass_and_share_memory_with_the_engine():
    """HEAD's dense (bs, k) rows pass, and the view reads ATOM's arrays without copying."""
    atom = decode_batch(_seed_seqs(), dense=True)
    with contracts.checking(depth="full"):
        batch = _view()(atom)
    assert batch is not None
    assert batch.draft_token_ids.shape == (128, K)
    assert np.shares_memory(batch.draft_token_ids, atom.scheduled_spec_decode_tokens)
    assert np.shares_memory(batch.token_ids, atom.scheduled_tokens)
    assert np.shares_memory(batch.num_scheduled_tokens, atom.num_scheduled_tokens)
    assert batch.seq_ids.tolist() == list(range(128))


def test_compacted_rows_are_the_seed_index_error():
    """Pre-fix ATOM indexed the compacted (127, 3) rows by batch position 127: IndexError."""
    rows = decode_batch(_seed_seqs()).scheduled_spec_decode_tokens
    assert rows is not None and rows.shape == (127, K)
    with pytest.raises(IndexError, match="index 127 is out of bounds for axis 0 with size 127"):
        rows[np.array([127])]


def test_compacted_rows_raise_sg101_naming_seq_127_at_position_127():
    """Through the adapter the compacted rows are SG101 at seq 127, batch position 127."""
    with pytest.raises(contracts.ContractViolation) as caught:
        _view()(decode_batch(_seed_seqs()))
    assert caught.value.codes == ("SG101",)
    assert str(caught.value).splitlines()[1] == (
        "  SG101 one draft row per decode seq, in batch order [ScheduledBatch.draft_token_ids, "
        "scheduler → runner]: seq 127 at batch position 127: decode seq without a draft row: "
        "draft_token_ids is i32[127,3] but num_decode=128 (expected num_decode=128; actual 127) "
        "{mtp_k=3, num_decode=128, num_tokens=512, num_seqs=128, max_blocks=3}")
    violation = caught.value.violations[0]
    assert (violation.seq_id, violation.position) == (127, 127)


def test_with_a_tracker_the_seq_fresh_from_prefill_is_named_wherever_it_sits():
    """[P | N1..N127]: P just finished prefill (deferred, no drafts); SG101 names P at 0."""
    fresh = sequence(500, 30)
    tracker = StepTracker()
    view = _view(tracker)
    view(prefill_batch([fresh], [30]))
    after_prefill(fresh)
    others = [sequence(i, 40, drafts=K) for i in range(1, 128)]
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 500 at batch position 0: decode seq has no drafts and no draft row: "
            "draft_token_ids is i32[127,3] but num_decode=128")):
        view(decode_batch([fresh, *others]))


def test_filtered_block_tables_are_sg105():
    """block_tables filtered by `if seq.block_table` has an entry missing: SG105."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    seqs[2].block_table = []
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG105 one entry per seq in every per-seq array [ScheduledBatch.block_tables, "
            "scheduler → runner]: seq 3 at batch position 3: that seq has no entry")):
        _view()(decode_batch(seqs, dense=True))


def test_compacted_cache_groups_are_sg105():
    """per_req_cache_groups compacted to the seqs with a group: SG105 on state_slots."""
    seqs = [sequence(i, 40, drafts=K, cache_group=None if i == 1 else 10 + i) for i in range(4)]
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "[ScheduledBatch.state_slots, scheduler → runner]: seq 3 at batch position 3: "
            "that seq has no entry: state_slots is i64[3] but num_seqs=4")):
        _view()(decode_batch(seqs, dense=True))


def test_full_cache_groups_become_state_slots():
    """With one group per seq the groups are the contract's state slots, in batch order."""
    seqs = [sequence(i, 40, drafts=K, cache_group=10 + i) for i in range(4)]
    with contracts.checking(depth="full"):
        batch = _view()(decode_batch(seqs, dense=True))
    assert batch is not None and batch.state_slots is not None
    assert batch.state_slots.tolist() == [10, 11, 12, 13]


@pytest.mark.parametrize("depth", ["essential", "full"])
def test_short_block_table_is_sg110_by_default(depth):
    """A table that ends before the seq's context does is named by SG110, at the default
    depth as at full (the ends of each table are read by default)."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    seqs[2].block_table = seqs[2].block_table[:1]
    atom = decode_batch(seqs, dense=True)
    with contracts.checking(depth="metadata"):
        _view()(atom)  # values are not read
    with contracts.checking(depth=depth), pytest.raises(contracts.ContractViolation,
                                                         match=re.escape(
            "SG110 block tables are not empty and cover the context [ScheduledBatch.block_tables,"
            " scheduler → runner]: seq 2 at batch position 2: block table is empty or ends "
            "before the context does")):
        _view()(atom)


def test_block_tables_reach_the_contract_without_a_copy():
    """The view's table is a read-only broadcast of one id per seq, not a copy of the lists."""
    seqs = [sequence(i, 400, drafts=K) for i in range(3)]
    with contracts.checking(depth="full"):
        batch = _view()(decode_batch(seqs, dense=True))
    assert batch is not None and isinstance(batch.block_tables, np.ndarray)
    tables = batch.block_tables
    assert tables.strides[1] == 0 and not tables.flags.writeable
    assert tables[:, 0].tolist() == [s.block_table[0] for s in seqs]


def test_the_default_depth_reads_the_tables_lengths_only_where_sg110_runs():
    """At the default depth the contract gets each table's first id; a table shorter
    than its context is marked (-1, for SG110) only where SG110 is among its rules."""
    seqs = [sequence(i, 400, drafts=K) for i in range(3)]
    seqs[1].block_table = seqs[1].block_table[:2]
    with contracts.checking(mode="warn"):
        batch = _view()(decode_batch(seqs, dense=True))
    assert batch is not None
    assert batch.block_tables.shape == (3, -(-400 // BLOCK_SIZE))
    first = [s.block_table[0] for s in seqs]
    if contracts.REGISTRY["SG110"].depth is contracts.Depth.ESSENTIAL:
        first[1] = -1
    assert batch.block_tables[:, 0].tolist() == first


def test_missing_field_is_sg001_naming_it():
    """An object without ATOM's req_ids is reported as such, not as an AttributeError."""
    atom = decode_batch(_seed_seqs(), dense=True)
    del atom.req_ids
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG001 field has the declared type [ATOM ScheduledBatch.req_ids, scheduler → runner]: "
            "the batch has no field 'req_ids'")):
        _view()(atom)


@pytest.mark.parametrize(("field", "value", "code"), [
    ("req_ids", ["a", "b", "c", "d"], "SG002"),
    ("block_tables", [["x"], [1], [2], [3]], "SG001"),
    ("scheduled_spec_decode_tokens", np.zeros(0), "SG002"),
    ("per_req_cache_groups", [1.5, 2, 3, 4], "SG001"),
    ("total_tokens_num", None, "SG001"),
])
def test_hostile_fields_become_contract_violations(field, value, code):
    """Wrong types in ATOM's fields are violations with their code, never foreign errors."""
    atom = decode_batch([sequence(i, 40, drafts=K) for i in range(4)], dense=True)
    setattr(atom, field, value)
    with contracts.checking(collect="all"), pytest.raises(contracts.ContractViolation) as caught:
        _view()(atom)
    assert code in caught.value.codes


def test_prefill_batch_passes_without_draft_rows():
    """A prefill batch (num_spec_step 0, no spec array) is a clean contract batch."""
    seqs = [sequence(i, 50) for i in range(3)]
    with contracts.checking(depth="full"):
        batch = _view()(prefill_batch(seqs, [20, 50, 8]))
    assert batch is not None
    assert batch.num_decode == 0 and batch.draft_token_ids.shape == (0, K)
    assert batch.context_lens.tolist() == [20, 50, 8]


ACCEPTED = ([2, 0], [3, 1], [0, 0])
PROMPTS = (10, 6)


def _steps(bad_placeholders: bool = False) -> list[int]:
    """Prefill two seqs, then decode steps through a tracked view at full depth; returns the
    last batch's context lengths as the view hands them on."""
    seqs = [sequence(1, PROMPTS[0]), sequence(2, PROMPTS[1])]
    view = _view(StepTracker())
    with contracts.checking(depth="full"):
        view(prefill_batch(seqs, list(PROMPTS)))
        for s in seqs:
            after_prefill(s)
        delivered, batch = [0, 0], None
        for accepted in ACCEPTED:
            atom = decode_batch(seqs, dense=True)
            batch = view(atom)
            sampled = np.full((2, K + 1), -1, dtype=np.int32)
            for row, count in enumerate(accepted):
                sampled[row, : count + 1] = 5
            view.verified(atom, sampled, np.asarray(accepted, dtype=np.int32))
            view.drafted(atom, np.full((2, K), 7, dtype=np.int32))
            for s, rejected in zip(seqs, delivered, strict=True):
                after_decode(s, 0 if bad_placeholders else rejected)
            delivered = [K - x for x in accepted]
    assert batch is not None
    return batch.context_lens.tolist()


def test_steady_decode_steps_advance_by_accepted_plus_one():
    """ATOM's placeholder accounting, read through the tracker, continues every seq exactly."""
    steps = len(ACCEPTED)
    starts = [prompt + sum(a[i] for a in ACCEPTED[:-1]) + steps - 1
              for i, prompt in enumerate(PROMPTS)]
    assert _steps() == [start + K + 1 for start in starts]


def test_placeholders_ignoring_rejections_are_sg601():
    """Appending k+1 placeholders whatever was rejected (ATOM C11) shifts positions: SG601."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG601 a seq resumes where its previous step left off [StepTransition.starts, "
            "scheduler → runner]: seq 1 at batch position 0: starts at position 18, but its "
            "previous step (row 0) left it at 17 (expected 17; actual 18)")):
        _steps(bad_placeholders=True)


def _layout_step(previous_step: str, current: list[int], layout: str = "pre-1771") -> None:
    """One step of seqs 0..3 (decode or prefill), then a decode step of ``current``.

    Before a prefill step, seq 9 is prefilled too (its drafts are its prefill's
    proposal): in the last step it is new to the previous forward, not to the engine,
    which SG661 would otherwise say. A first step of decode seqs tells the tracker that
    seqs ran before it watched."""
    seqs = {i: sequence(i, 40, drafts=K) for i in range(10)}
    view = _view(StepTracker(), layout)
    if previous_step == "prefill":
        view(prefill_batch([seqs[9]], [40]))
        after_prefill(seqs[9])
        view(prefill_batch([seqs[i] for i in range(4)], [40] * 4))
        for i in range(4):
            after_prefill(seqs[i])
    else:
        view(decode_batch([seqs[i] for i in range(4)], dense=True))
    with contracts.checking(depth="full"):
        view(decode_batch([seqs[i] for i in current], dense=True))


def test_deferred_seqs_first_is_the_layout_atom_writes():
    """[deferred | new] after a decode step passes SG612."""
    _layout_step("decode", [2, 3, 9])


def test_new_seqs_first_is_allowed_after_a_prefill_step():
    """[new | deferred] is ATOM's other branch, taken only after a prefill step."""
    _layout_step("prefill", [9, 2, 3])


def test_interleaved_new_and_deferred_seqs_are_sg612():
    """A new seq ahead of deferred ones after a decode step misfeeds them: SG612."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG612 deferred seqs come first in an ATOM decode batch [AtomLayout.prev_rows, "
            "scheduler → runner]: seq 2 at batch position 1: was in the previous forward "
            "(row 2) but comes after new seq 9 at position 0")):
        _layout_step("decode", [9, 2, 3])


def test_atom_from_pr1771_addresses_each_span_so_any_order_is_clean():
    """From #1771 the runner addresses spans by batch position: [new | deferred] is valid."""
    _layout_step("decode", [9, 2, 3], layout="pr1771")


def test_unknown_layout_is_refused_naming_the_known_ones():
    """A runner version the view does not model is a configuration error, said plainly."""
    with pytest.raises(ValueError, match=re.escape(
            "AtomView: layout='v2' is not one of ('pr1771', 'pre-1771')")):
        _view(layout="v2")


def test_mixed_phase_batch_is_sg611():
    """A batch claiming prefill and decode seqs at once breaks ATOM's one-phase rule."""
    atom = decode_batch([sequence(i, 40, drafts=K) for i in range(4)], dense=True)
    atom.total_seqs_num_prefill, atom.total_seqs_num_decode = 1, 3
    assert atom.scheduled_spec_decode_tokens is not None
    atom.scheduled_spec_decode_tokens = atom.scheduled_spec_decode_tokens[:3]
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG611 an ATOM batch is all prefill or all decode [AtomLayout.seq_ids, "
                "scheduler → runner]: seq 1 at batch position 1: batch mixes 1 prefill and 3 "
                "decode seqs")):
        _view()(atom)


def test_num_spec_step_other_than_mtp_k_is_sg613():
    """A decode batch whose num_spec_step differs from the drafter's k is SG613."""
    atom = decode_batch([sequence(i, 40, drafts=K) for i in range(2)], dense=True,
                        num_spec_step=2)
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG613 num_spec_step equals the drafter's mtp_k on decode batches "
                "[AtomLayout.num_spec_step, scheduler → runner]: decode batch has "
                "num_spec_step=2 (expected mtp_k=3; actual 2)")):
        _view()(atom)


def test_dp_dummy_seq_id_minus_one_is_sg010():
    """ATOM's DP dummy run uses seq id -1, the deferred-output flag key (C14): SG010."""
    seqs = [sequence(0, 40, drafts=K)]
    seqs[0].id = -1
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG010 seq ids are unique and non-negative [ScheduledBatch.seq_ids, "
                "scheduler → runner]: seq -1 at batch position 0: seq id -1 is negative")):
        _view()(decode_batch(seqs, dense=True))


@pytest.mark.parametrize("rejected", [0, 1])
def test_without_a_tracker_the_batch_rejected_count_comes_off_the_context(rejected):
    """ATOM's runner subtracts ``num_rejected`` from a decode context: with none rejected
    the engine's own lengths reach the contract (no copy), with one rejected the
    shortened context is what SG111 judges."""
    seqs = [sequence(0, 40, drafts=K), sequence(1, K + 2, drafts=K, num_rejected=rejected)]
    atom = decode_batch(seqs, dense=True)
    atom.context_lens[1] = K + 2  # one prompt token before the k+1 scheduled ones
    if not rejected:
        with contracts.checking(depth="full"):
            batch = _view()(atom)
        assert batch is not None and batch.context_lens is atom.context_lens
        return
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG111 context lengths cover the scheduled tokens [ScheduledBatch.context_lens, "
                "scheduler → runner]: seq 1 at batch position 1: decode seq has context length "
                "4, only its 4 scheduled tokens: no prompt before them")):
        _view()(atom)


_TABLES_NOT_READ = ("SG001 field has the declared type [ScheduledBatch.block_tables, "
                    "scheduler → runner]: expected a numpy array or torch tensor, got list")


@pytest.mark.parametrize(("table", "clean"), [
    pytest.param(lambda t: tuple(t), True, id="tuple"),
    pytest.param(lambda t: type("Blocks", (list,), {})(t), True, id="list-subclass"),
    pytest.param(lambda t: dict(enumerate(t)), False, id="dict"),
    pytest.param(lambda t: {}, False, id="empty-dict"),
    pytest.param(lambda t: "".join(map(chr, t)), False, id="string"),
    pytest.param(lambda t: np.asarray(t), False, id="ndarray"),
    pytest.param(lambda t: [None, *t[1:]], False, id="none-entry"),
])
def test_a_block_table_that_is_not_a_list_of_ids_is_named_by_default(table, clean):
    """Every table is read at the default depth: lists and tuples of ids pass; a dict, a
    string, an array or a non-id entry leaves the list to the contract, which names it."""
    seqs = [sequence(i, 40, drafts=K) for i in range(3)]
    atom = decode_batch(seqs, dense=True)
    atom.block_tables[1] = table(atom.block_tables[1])
    if clean:
        batch = _view()(atom)
        assert batch is not None and batch.seq_ids.tolist() == [0, 1, 2]
        return
    with pytest.raises(contracts.ContractViolation, match=re.escape(_TABLES_NOT_READ)):
        _view()(atom)
