"""What each view reads at metadata depth: container sizes and keys, not their entries."""

from __future__ import annotations

import re

import numpy as np
import pytest
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence
from vllm_engine import scheduler_output

from specguard import contracts
from specguard.adapters import AtomView, StepTracker, VllmView

K = 3


@pytest.fixture(autouse=True)
def _metadata_depth():
    """Every test here runs at metadata depth, the cheap always-on setting."""
    with contracts.checking(depth="metadata"):
        yield


def _atom_view() -> AtomView:
    return AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)


def test_atom_block_tables_are_not_walked_at_metadata_depth():
    """At metadata depth ATOM's table lists reach the contract unread: a broadcast of -1,
    one row per table, as wide as the longest context needs (40 tokens: 3 blocks)."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    batch = _atom_view()(decode_batch(seqs, dense=True))
    assert batch is not None and isinstance(batch.block_tables, np.ndarray)
    assert batch.block_tables.shape == (4, 3)
    assert batch.block_tables.strides == (0, 0) and (batch.block_tables == -1).all()


def test_a_snapshot_of_a_metadata_depth_violation_holds_the_tables_themselves(
        tmp_path, monkeypatch):
    """The snapshot of a violation raised at metadata depth keeps ATOM's real tables, so
    its full re-check reports the batch's own violations, not the unread stand-in."""
    from specguard.adapters.snapshots import load

    monkeypatch.setenv("SPECGUARD_SNAPSHOT_DIR", str(tmp_path))
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    atom = decode_batch(seqs, dense=True)
    assert atom.scheduled_spec_decode_tokens is not None
    atom.scheduled_spec_decode_tokens = atom.scheduled_spec_decode_tokens[:3]  # SG101
    with pytest.raises(contracts.ContractViolation, match="SG101"):
        _atom_view()(atom)
    [path] = tmp_path.glob("*.json")
    tables = load(path).fields["block_tables"]
    assert tables.tolist() == [s.block_table for s in seqs]


def test_atom_block_tables_are_read_at_full_depth():
    """At full depth every table is read: one block id per seq reaches SG110."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    with contracts.checking(depth="full"):
        batch = _atom_view()(decode_batch(seqs, dense=True))
    assert batch is not None
    assert batch.block_tables.shape[0] == 4 and batch.block_tables.shape[1] >= 1


def test_atom_filtered_block_tables_are_sg105_at_metadata_depth():
    """Counting the tables is enough for SG105 to name the seq a filtered list misses."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    seqs[2].block_table = []
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG105 one entry per seq in every per-seq array [ScheduledBatch.block_tables, "
            "scheduler → runner]: seq 3 at batch position 3: that seq has no entry")):
        _atom_view()(decode_batch(seqs, dense=True))


def test_vllm_clean_output_at_metadata_depth_reads_entries_on_first_use():
    """A clean output passes on its keys; its counts and drafts are read when asked for."""
    step = VllmView(mtp_k=K, vocab_size=VOCAB).schedule(
        scheduler_output({"a": [5, 6, 7], "b": [8]}, {"new": 40}))
    assert step.req_ids == ("a", "b", "new")
    assert step.num_scheduled.tolist() == [4, 2, 40]
    assert step.num_draft_tokens.tolist() == [3, 1, 0]
    assert step.draft_tokens.seq_ids.tolist() == [0, 1]


def test_vllm_drafts_of_a_request_outside_the_batch_are_sg114_at_metadata_depth():
    """Drafts keyed by a request the batch does not hold: SG114 from the keys alone."""
    output = scheduler_output({"a": [5, 6, 7]}, {"new": 40})
    output.scheduled_spec_decode_tokens["gone"] = [1, 2, 3]
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG114 drafts belong to decode seqs of the batch [vLLM SchedulerOutput."
            "scheduled_spec_decode_tokens, scheduler → runner]: request 'gone' has drafts "
            "but is not in the batch")):
        VllmView(mtp_k=K, vocab_size=VOCAB).schedule(output)


@pytest.mark.parametrize("req_ids", [None, ["a", "b"]], ids=["dict order", "runner order"])
def test_vllm_drafts_of_as_many_requests_as_the_batch_but_one_outside_are_sg114(req_ids):
    """A decode batch whose drafts are keyed exactly by its requests, in its order,
    passes on the keys' order alone; one of as many keys that is not the batch's is
    still SG114."""
    output = scheduler_output({"a": [5, 6, 7], "b": [1, 2, 3]})
    with contracts.checking(depth="metadata"):
        VllmView(mtp_k=K, vocab_size=VOCAB).schedule(output, req_ids=req_ids)
    output.scheduled_spec_decode_tokens = {"a": [5, 6, 7], "gone": [1, 2, 3]}
    with contracts.checking(depth="metadata"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "scheduled_spec_decode_tokens, scheduler → runner]: request 'gone' has "
                "drafts but is not in the batch")):
        VllmView(mtp_k=K, vocab_size=VOCAB).schedule(output, req_ids=req_ids)


def test_vllm_request_of_the_runner_batch_without_a_count_is_sg105_at_metadata_depth():
    """The runner's batch order names a request the scheduler gave no count: SG105."""
    output = scheduler_output({"a": [5, 6, 7]}, {"new": 40})
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG105 one entry per seq in every per-seq array [vLLM SchedulerOutput."
            "num_scheduled_tokens, scheduler → runner]: at batch position 1: request 'late' "
            "is in the batch without a scheduled token count")):
        VllmView(mtp_k=K, vocab_size=VOCAB).schedule(output, req_ids=["a", "late", "new"])


def test_vllm_total_that_is_not_an_int_is_sg001_at_metadata_depth():
    """``total_num_scheduled_tokens`` of another type is SG001 without reading a dict."""
    output = scheduler_output({"a": [5, 6, 7]})
    output.total_num_scheduled_tokens = "4"  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG001 field has the declared type [vLLM SchedulerOutput."
            "total_num_scheduled_tokens, scheduler → runner]: total_num_scheduled_tokens "
            "must be an int, got str")):
        VllmView(mtp_k=K, vocab_size=VOCAB).schedule(output)


def test_vllm_entries_read_later_are_checked_then():
    """A count that is not an integer passes the keys, and is SG002 when it is read."""
    output = scheduler_output({"a": [5, 6, 7]}, {"new": 40})
    output.num_scheduled_tokens["new"] = "forty"  # pyright: ignore[reportArgumentType]
    step = VllmView(mtp_k=K, vocab_size=VOCAB).schedule(output)
    with pytest.raises(contracts.ContractViolation, match="SG002"):
        step.num_scheduled  # noqa: B018


def test_vllm_view_with_a_tracker_reads_every_entry_at_metadata_depth():
    """A tracker needs the counts each step: the entries are read, and checked, at once."""
    output = scheduler_output({"a": [5, 6, 7]}, {"new": 40})
    output.num_scheduled_tokens["new"] = "forty"  # pyright: ignore[reportArgumentType]
    with pytest.raises(contracts.ContractViolation, match="SG002"):
        VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker()).schedule(output)


def test_vllm_verify_rows_are_not_read_below_full_depth():
    """Below full depth ``verified`` checks the sampler's rows, not the step's drafts."""
    view = VllmView(mtp_k=K, vocab_size=VOCAB)
    step = view.schedule(scheduler_output({"a": [5, 6, 7]}))
    rows = np.array([[5, 6, 9, -1]])
    verified = view.verified(step, rows)
    assert verified is not None and verified.num_accepted.tolist() == [2]
    assert step._entries is None


@pytest.mark.parametrize("depth", ["essential", "full"])
def test_vllm_entries_are_read_at_once_where_value_rules_run(depth):
    """At the default depth and at full, SG621 and SG622 read the counts: the step is
    read when scheduled."""
    with contracts.checking(depth=depth):
        step = VllmView(mtp_k=K, vocab_size=VOCAB).schedule(
            scheduler_output({"a": [5, 6, 7], "b": [8]}, {"new": 40}))
    assert step._entries is not None
