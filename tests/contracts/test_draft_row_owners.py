"""SG115: draft row i belongs to decode seq i, checked at the default depth.

Draft rows with the right count but permuted between seqs pass every shape rule; each seq
would verify a neighbour's drafts. When the batch carries the seq each row was made for
(``draft_seq_ids``, e.g. ``DraftTokens.seq_ids``), the order is checked: on host arrays
at once, on a device as a deferred verdict read at the next sync point.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from contract_builders import BACKENDS, ID_DTYPES, build

from specguard import contracts
from specguard.contracts._core import _values

SB = contracts.ScheduledBatch
_PERMUTED = (
    "SG115 draft row i belongs to decode seq i [ScheduledBatch.draft_seq_ids, "
    "scheduler → runner]: seq 40 at batch position 0: draft row 0 belongs to seq 42 "
    "(expected seq 40; actual seq 42)"
)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ID_DTYPES)
def test_rows_in_decode_order_pass_at_the_default_depth(backend, dtype):
    """Rows made for 40, 42, 44 (the decode seqs in batch order) pass."""
    batch = build(SB, backend=backend, dtype=dtype, draft_seq_ids=np.array([40, 42, 44]))
    assert contracts.validate(batch) == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ID_DTYPES)
def test_permuted_rows_are_sg115_naming_seq_and_position(backend, dtype):
    """Rows of 42 and 40 swapped: SG115 names seq 40 at batch position 0, by default."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(_PERMUTED)) as caught:
        build(SB, backend=backend, dtype=dtype, draft_seq_ids=np.array([42, 40, 44]))
    violation = caught.value.violations[0]
    assert (violation.code, violation.seq_id, violation.position) == ("SG115", 40, 0)


def test_a_stale_row_names_the_seq_it_was_handed_to():
    """A row made for seq 43 (a prefill seq) in the place of seq 44's: position 4 named."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 44 at batch position 4: draft row 2 belongs to seq 43 "
            "(expected seq 44; actual seq 43)")):
        build(SB, draft_seq_ids=np.array([40, 42, 43]))


def test_rows_for_a_different_set_of_decode_seqs_are_sg115():
    """is_decode marking four seqs for three rows: SG115 names the rows it cannot pair,
    next to SG107's count of the phases."""
    with contracts.checking(collect="all"), pytest.raises(contracts.ContractViolation) as caught:
        build(SB, draft_seq_ids=np.array([40, 42, 44]),
              is_decode=np.array([True, True, True, False, True]),
              num_scheduled_tokens=np.array([3, 3, 3, 3, 3]))
    assert caught.value.codes == ("SG107", "SG115")
    assert caught.value.violations[1].format().startswith(
        "SG115 draft row i belongs to decode seq i [ScheduledBatch.draft_seq_ids, "
        "scheduler → runner]: is_decode marks 4 decode seqs for 3 draft rows "
        "(expected 3 decode seqs; actual 4)")


def test_without_draft_seq_ids_the_order_is_not_checked():
    """The field is optional: a batch that does not say whose rows they are passes."""
    assert contracts.validate(build(SB), depth="full") == []


def test_metadata_depth_skips_the_order():
    """Opting down to metadata depth reads no value, so permuted rows pass unread."""
    with contracts.checking(depth="metadata"):
        build(SB, draft_seq_ids=np.array([42, 40, 44]))


def test_from_mapping_rows_carry_their_seqs_into_the_batch():
    """DraftTokens.seq_ids is what draft_seq_ids takes: built in order, it passes."""
    drafts = contracts.DraftTokens.from_mapping(
        [40, 42, 44], {40: [5, 6], 42: [7, 8]}, mtp_k=2, vocab_size=32, placeholder=0)
    batch = build(SB, draft_token_ids=drafts.draft_token_ids, num_drafts=drafts.num_drafts,
                  draft_seq_ids=drafts.seq_ids)
    assert contracts.validate(batch, depth="full") == []


#: The value rules of the batch that the default depth runs (each queues its verdicts).
_DEFAULT_RULES = [r for r in contracts.REGISTRY.values()
                  if "ScheduledBatch" in r.applies_to and r.depth is contracts.Depth.ESSENTIAL]


@pytest.fixture
def device_path(monkeypatch):
    """CPU tensors take the accelerator path: verdicts computed as tensors, read later."""
    monkeypatch.setattr(_values, "HOST_DEVICE_TYPES", set())


def test_on_a_device_permuted_rows_are_a_deferred_verdict(device_path):
    """On the device path nothing raises at construction; the flush reports SG115."""
    contracts.flush_deferred(wait=True)
    build(SB, backend="torch", draft_seq_ids=np.array([42, 40, 44]))
    assert contracts.pending_deferred() >= len(_DEFAULT_RULES)  # a verdict or more per rule
    with pytest.raises(contracts.DeferredViolation, match=re.escape(
            "SG115 draft row i belongs to decode seq i [ScheduledBatch.draft_seq_ids, "
            "scheduler → runner]: at batch position 0: draft row belongs to another seq")):
        contracts.flush_deferred()


def test_on_a_device_rows_in_order_leave_a_clean_verdict(device_path):
    """The same batch in order queues its verdicts, and the flush finds nothing."""
    contracts.flush_deferred(wait=True)
    build(SB, backend="torch", draft_seq_ids=np.array([40, 42, 44]))
    assert contracts.pending_deferred() >= len(_DEFAULT_RULES)
    contracts.flush_deferred()
    assert contracts.pending_deferred() == 0
