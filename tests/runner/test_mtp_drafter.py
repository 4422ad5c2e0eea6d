"""The drafter's padded input (vLLM layout) and its proposals."""

from __future__ import annotations

import pytest
import torch

from specguard import contracts
from specguard.runner import faults
from specguard.runner.config import ModelConfig
from specguard.runner.drafter import (
    Drafter,
    context_offsets,
    draft_step_input,
    draft_step_metadata,
    drafter_input,
    next_token_ids,
)
from specguard.runner.model import TinyLM

MODEL = TinyLM(ModelConfig())


def test_next_token_is_the_last_real_entry_or_the_backup():
    """Decode rows give their last token, finished prefills theirs, mid-prompt rows the backup."""
    sampled = torch.tensor([[4, 5, -1, -1], [7, -1, -1, -1], [-1, -1, -1, -1]])
    backup = torch.tensor([100, 101, 102])
    assert next_token_ids(sampled, backup).tolist() == [5, 7, 102]


def test_one_token_rows_still_mask_discarded_rows():
    """With no decode seq (one token per row) a discarded row still takes its backup."""
    sampled = torch.tensor([[7], [-1]])
    assert next_token_ids(sampled, torch.tensor([1, 2])).tolist() == [7, 2]


def test_sentinel_fault_lets_the_discarded_row_through():
    """The vLLM 0.11.0 fast path skips the mask when rows are one token wide."""
    sampled = torch.tensor([[7], [-1]])
    chosen = next_token_ids(sampled, torch.tensor([1, 2]), faults.SENTINEL_TO_EMBEDDING)
    assert chosen.tolist() == [7, -1]
    wide = torch.tensor([[7, 8], [-1, -1]])
    assert next_token_ids(wide, torch.tensor([1, 2]),
                          faults.SENTINEL_TO_EMBEDDING).tolist() == [8, 2]


def _model_input(ids, starts):
    ids = torch.tensor(ids)
    return contracts.ModelInput(
        vocab_size=MODEL.vocab_size, num_slots=64, num_tokens=ids.shape[0],
        seq_ids=torch.arange(len(starts) - 1), input_ids=ids,
        positions=torch.arange(ids.shape[0]), slot_mapping=torch.arange(ids.shape[0]),
        query_start_loc=torch.tensor(starts))


def test_drafter_input_shifts_ids_and_writes_next_tokens_where_it_samples():
    """Ids move left by one; each seq's newest token sits after its last accepted one."""
    model_input = _model_input([10, 11, 12, 13, 20, 21], [0, 4, 6])
    inputs = drafter_input(model_input=model_input, next_tokens=torch.tensor([90, 91]),
                           num_rejected=torch.tensor([2, 0]), vocab_size=MODEL.vocab_size,
                           max_seq_len=6)
    assert inputs.sample_indices.tolist() == [1, 5]
    assert inputs.input_ids.tolist() == [11, 90, 13, 20, 21, 91]


def test_drafter_input_attends_through_each_span():
    """The first pass's seq_lens end at each span's last position; max_seq_len is the
    host's bound, passed through."""
    model_input = _model_input([10, 11, 12, 13, 20, 21], [0, 4, 6])
    inputs = drafter_input(model_input=model_input, next_tokens=torch.tensor([90, 91]),
                           num_rejected=torch.tensor([2, 0]), vocab_size=MODEL.vocab_size,
                           max_seq_len=9)
    assert inputs.seq_lens is not None and inputs.seq_lens.tolist() == [4, 6]
    assert (inputs.max_seq_len, inputs.draft_step) == (9, 0)


def test_drafter_input_leaves_the_padding_rows_out():
    """Padding rows of the target's stream belong to no seq: the drafter never sees them."""
    ids = torch.tensor([10, 11, 12, 0, 0])
    model_input = contracts.ModelInput(
        vocab_size=MODEL.vocab_size, num_slots=64, num_tokens=5, seq_ids=torch.arange(1),
        input_ids=ids, positions=torch.tensor([0, 1, 2, 0, 0]),
        slot_mapping=torch.tensor([0, 1, 2, -1, -1]), query_start_loc=torch.tensor([0, 3]),
        num_padding=2)
    inputs = drafter_input(model_input=model_input, next_tokens=torch.tensor([90]),
                           num_rejected=torch.tensor([0]), vocab_size=MODEL.vocab_size,
                           max_seq_len=3)
    assert inputs.num_tokens == 3 and inputs.input_ids.tolist() == [11, 12, 90]
    assert inputs.seq_lens is not None and inputs.seq_lens.tolist() == [3]


def test_each_draft_step_advances_positions_and_seq_lens_together():
    """Step j feeds one token per seq at the sampled position + j, seq_len one past it,
    and max_seq_len j past the first pass's."""
    model_input = _model_input([10, 11, 12, 13, 20, 21], [0, 4, 6])
    first = drafter_input(model_input=model_input, next_tokens=torch.tensor([90, 91]),
                          num_rejected=torch.tensor([2, 0]), vocab_size=MODEL.vocab_size,
                          max_seq_len=6)
    step = draft_step_input(first, 2, torch.tensor([300, 301]))
    assert step.positions.tolist() == [3, 7]
    assert step.seq_lens is not None and step.seq_lens.tolist() == [4, 8]
    assert (step.max_seq_len, step.draft_step, step.num_tokens) == (8, 2, 2)
    assert step.input_ids.tolist() == [300, 301]
    assert step.sample_indices.tolist() == [0, 1]


def test_a_draft_step_with_max_seq_len_left_behind_is_stopped():
    """max_seq_len not advanced with the step (vLLM 0.11.1's loop) is SG307 at the
    default depth."""
    model_input = _model_input([10, 11, 12, 13, 20, 21], [0, 4, 6])
    first = drafter_input(model_input=model_input, next_tokens=torch.tensor([90, 91]),
                          num_rejected=torch.tensor([0, 0]), vocab_size=MODEL.vocab_size,
                          max_seq_len=6)
    step = draft_step_input(first, 1, torch.tensor([300, 301]))
    with contracts.checking(mode="strict"), \
            pytest.raises(contracts.ContractViolation) as caught:
        contracts.DrafterInput(**{**_fields(step), "max_seq_len": first.max_seq_len})
    assert caught.value.codes == ("SG307",)
    assert "seq 1 at batch position 1: seq_len is 7 at draft step 1 is longer than " \
        "max_seq_len=6" in str(caught.value)


def _fields(obj):
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


def test_drafter_input_stops_a_sentinel_before_the_embedding():
    """A -1 next token is a violation of the runner → drafter hand-over (SG301)."""
    model_input = _model_input([10, 11, 12, 20, 21], [0, 3, 5])
    with contracts.checking(mode="strict", depth="full"), \
            pytest.raises(contracts.ContractViolation) as caught:
        drafter_input(model_input=model_input, next_tokens=torch.tensor([90, -1]),
                      num_rejected=torch.tensor([0, 0]), vocab_size=MODEL.vocab_size,
                      max_seq_len=5)
    assert caught.value.codes == ("SG301",)
    assert "seq 1 at batch position 1, token 4: input id is -1" in str(caught.value)


def test_proposals_are_mtp_k_valid_ids_per_seq_and_deterministic():
    """Every seq, discarded rows included, gets mtp_k in-vocabulary drafts."""
    model_input = _model_input([10, 11, 12, 20, 21], [0, 3, 5])
    inputs = drafter_input(model_input=model_input, next_tokens=torch.tensor([90, 91]),
                           num_rejected=torch.tensor([0, 1]), vocab_size=MODEL.vocab_size,
                           max_seq_len=5)
    hidden = torch.randn(5, MODEL.config.d_model, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(0))
    drafter = Drafter(MODEL, mtp_k=3)
    first, second = drafter.propose(inputs, hidden), drafter.propose(inputs, hidden)
    assert first.draft_token_ids.shape == (2, 3)
    assert isinstance(first.draft_token_ids, torch.Tensor)
    assert isinstance(second.draft_token_ids, torch.Tensor)
    assert torch.equal(first.draft_token_ids, second.draft_token_ids)
    assert first.seq_ids.tolist() == [0, 1]
    assert int(first.draft_token_ids.min()) >= 0
    assert int(first.draft_token_ids.max()) < MODEL.vocab_size


def _first_pass(num_rejected):
    model_input = _model_input([10, 11, 12, 13, 20, 21], [0, 4, 6])
    return drafter_input(model_input=model_input, next_tokens=torch.tensor([90, 91]),
                         num_rejected=torch.tensor(num_rejected), vocab_size=MODEL.vocab_size,
                         max_seq_len=6)


def test_advanced_metadata_puts_every_draft_step_at_its_context_end():
    """Advanced with the step, each seq's context ends at its token: offset 0."""
    first = _first_pass([2, 0])
    for step in (1, 2):
        metadata = draft_step_metadata(first, step)
        assert context_offsets(metadata).tolist() == [0, 0]
        built = draft_step_input(first, step, torch.tensor([300, 301]), metadata)
        assert built.seq_lens is metadata.seq_lens and built.max_seq_len == 6 + step


def test_stale_metadata_keeps_the_first_passs_context_end_at_every_step():
    """The fault's metadata: seq_lens and max_seq_len of the first pass (spans ending at
    positions 3 and 5) at every step, so the tokens at positions 1 + j and 5 + j lie
    j - 2 and j positions from their context ends; SG306 stops it at any step."""
    first = _first_pass([2, 0])
    for step in (1, 2):
        metadata = draft_step_metadata(first, step, faults.STALE_DRAFT_SEQ_LENS)
        assert metadata.seq_lens.tolist() == [4, 6] and metadata.max_seq_len == 6
        assert context_offsets(metadata).tolist() == [step - 2, step]
        with contracts.checking(mode="strict"), \
                pytest.raises(contracts.ContractViolation) as caught:
            draft_step_input(first, step, torch.tensor([300, 301]), metadata)
        assert caught.value.codes == ("SG306",)
        position = 0 if step == 1 else 1
        assert f"batch position {position}: seq_len is" in str(caught.value)
        assert f"at draft step {step}" in str(caught.value)


def test_max_seq_len_bounds_the_context_the_head_reads():
    """A max_seq_len below a seq_len cuts that seq's context short: its token lies past
    the context end the kernel can read."""
    first = _first_pass([0, 0])
    metadata = draft_step_metadata(first, 1)
    short = metadata._replace(max_seq_len=metadata.max_seq_len - 1)
    assert context_offsets(short).tolist() == [0, 1]


def test_stale_metadata_changes_the_later_drafts_and_not_the_first():
    """Step 0 runs on the target's hidden state and is the same; the steps after it
    draft from the wrong context end."""
    first = _first_pass([0, 1])
    hidden = torch.randn(6, MODEL.config.d_model, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(1))
    with contracts.checking(mode="off"):  # unchecked, as the fault runs without contracts
        clean = _tensor(Drafter(MODEL, mtp_k=4).propose(first, hidden).draft_token_ids)
        stale = _tensor(Drafter(MODEL, mtp_k=4, fault=faults.STALE_DRAFT_SEQ_LENS)
                        .propose(first, hidden).draft_token_ids)
    assert torch.equal(clean[:, 0], stale[:, 0])
    assert not torch.equal(clean[:, 1:], stale[:, 1:])


def _tensor(value):
    assert isinstance(value, torch.Tensor)
    return value
