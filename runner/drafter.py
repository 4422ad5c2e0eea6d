"""The MTP head as a drafter: padded input like vLLM's, ``mtp_k`` autoregressive steps.

The drafter sees every seq of the step, chunked prefills included (padded speculation):
its input is the target's token stream shifted left by one, with each seq's newest token
written at the position it samples from. A seq in the middle of its prompt has no new
token; its row is discarded, and the next prompt token stands in so that every id the
head embeds is a real one.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, cast

import torch

from specguard import contracts
from specguard.runner import faults
from specguard.runner._timing import CLOCK
from specguard.runner.model import TinyLM

__all__ = ["DraftStep", "Drafter", "context_offsets", "draft_step_input", "draft_step_metadata",
           "drafter_input", "next_token_ids"]


def next_token_ids(sampled: torch.Tensor, backup_token_ids: torch.Tensor,
                   fault: str | None = None) -> torch.Tensor:
    """Each seq's newest token: the last real entry of its sampled row, else the backup.

    ``sampled`` is ``[num_seqs, width]``: a verify row for a decode seq, one token for a
    finished prefill, all ``-1`` for a discarded (mid-prompt) row.
    """
    if fault == faults.SENTINEL_TO_EMBEDDING and sampled.shape[1] == 1:
        # vLLM 0.11.0: with one token per row "every row is valid", so the discarded
        # rows' -1 goes through unmasked.
        return sampled[:, 0]
    valid = (sampled >= 0).sum(dim=1)
    last = sampled.gather(1, (valid - 1).clamp(min=0)[:, None]).squeeze(1)
    return torch.where(valid > 0, last, backup_token_ids)


def drafter_input(
    *, model_input: contracts.ModelInput, next_tokens: torch.Tensor,
    num_rejected: torch.Tensor, vocab_size: int, max_seq_len: int,
) -> contracts.DrafterInput:
    """Shift the target's ids left by one and write each seq's newest token where it
    samples: after its last accepted token (``num_rejected`` slots before its span end).

    The first pass attends over each seq's context through its span: ``seq_lens`` is the
    span's last position + 1, and ``max_seq_len`` the host's bound on the longest (the
    scheduled context lengths, which a deferred seq's rejections only shorten).
    """
    starts = cast(torch.Tensor, model_input.query_start_loc)
    real = model_input.num_tokens - (model_input.num_padding or 0)  # padding is no seq's
    sample_indices = starts[1:] - 1 - num_rejected
    ids = torch.roll(cast(torch.Tensor, model_input.input_ids)[:real], -1)
    ids[sample_indices] = next_tokens
    positions = cast(torch.Tensor, model_input.positions)[:real]
    seq_lens = positions[(starts[1:] - 1).clamp(min=0)] + 1
    return CLOCK.build(
        contracts.DrafterInput, vocab_size=vocab_size, num_tokens=real,
        seq_ids=model_input.seq_ids, input_ids=ids, positions=positions,
        query_start_loc=starts, sample_indices=sample_indices, seq_lens=seq_lens,
        max_seq_len=max_seq_len, draft_step=0)


class DraftStep(NamedTuple):
    """A draft step's positions and attention metadata: one token per seq."""

    positions: torch.Tensor
    seq_lens: torch.Tensor
    max_seq_len: int


def draft_step_metadata(first: contracts.DrafterInput, step: int,
                        fault: str | None = None) -> DraftStep:
    """Draft step ``step`` (from 1): each seq's token one position past the previous
    step's, its attention metadata advanced with it (vLLM's ``seq_lens += 1`` and
    ``max_seq_len + 1`` per draft step), so each seq's context ends at its token."""
    picks = cast(torch.Tensor, first.sample_indices)
    positions = cast(torch.Tensor, first.positions)[picks] + step
    if fault == faults.STALE_DRAFT_SEQ_LENS:
        # vLLM 0.11.1: the metadata built for the first pass is reused by every later
        # draft step, its seq_lens and max_seq_len never advanced.
        return DraftStep(positions, cast(torch.Tensor, first.seq_lens),
                         int(first.max_seq_len or 0))
    return DraftStep(positions, positions + 1, int(first.max_seq_len or 0) + step)


def draft_step_input(first: contracts.DrafterInput, step: int, token_ids: torch.Tensor,
                     metadata: DraftStep | None = None) -> contracts.DrafterInput:
    """Draft step ``step``'s hand-over: one token per seq, the previous draft, with the
    step's positions and attention metadata (:func:`draft_step_metadata`'s, unless given)."""
    if metadata is None:
        metadata = draft_step_metadata(first, step)
    count = metadata.positions.shape[0]
    rows, picks = _row_offsets(count, metadata.positions.dtype, metadata.positions.device)
    return CLOCK.build(
        contracts.DrafterInput, vocab_size=first.vocab_size, num_tokens=count,
        seq_ids=first.seq_ids, input_ids=token_ids, positions=metadata.positions,
        query_start_loc=rows, sample_indices=picks, seq_lens=metadata.seq_lens,
        max_seq_len=metadata.max_seq_len, draft_step=step)


@functools.lru_cache(maxsize=64)
def _row_offsets(count: int, dtype: torch.dtype, device: torch.device
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``0 .. count``: a draft step's span offsets (one token per seq), and without its
    last entry, its sample indices. The same few batch sizes recur step after step, and
    nothing writes to these, so each pair is made once."""
    rows = torch.arange(count + 1, dtype=dtype, device=device)
    return rows, rows[:-1]


def context_offsets(metadata: DraftStep) -> torch.Tensor:
    """How far each seq's token lies past the end of the context its attention reads: the
    last key is at ``seq_len - 1``, and a kernel sized by ``max_seq_len`` reads no more
    keys than that."""
    ends = metadata.seq_lens.clamp(max=metadata.max_seq_len) - 1
    return metadata.positions - ends


class Drafter:
    """Proposes ``mtp_k`` tokens per seq with the model's MTP head."""

    def __init__(self, model: TinyLM, mtp_k: int, fault: str | None = None) -> None:
        self.model = model
        self.mtp_k = mtp_k
        self.fault = fault

    def skipped(self, inputs: contracts.DrafterInput) -> contracts.DrafterOutput:
        """What a step that runs no drafter hands back: zeros, none of them proposed."""
        ids = cast(torch.Tensor, inputs.seq_ids)
        count = ids.shape[0]
        return CLOCK.build(
            contracts.DrafterOutput, mtp_k=self.mtp_k, vocab_size=self.model.vocab_size,
            seq_ids=ids, draft_token_ids=ids.new_zeros((count, self.mtp_k)),
            num_proposed=ids.new_zeros(count))

    @torch.inference_mode()
    def propose(self, inputs: contracts.DrafterInput, target_hidden: torch.Tensor,
                num_proposed: torch.Tensor | None = None) -> contracts.DrafterOutput:
        """Drafts ``[num_seqs, mtp_k]``: step 0 from the target's hidden state at each
        sample index, later steps from the head's own state and its previous draft, each
        placed by its step's attention metadata (see :meth:`TinyLM.mtp_step_embedded`)."""
        embedded = self.model.embed(cast(torch.Tensor, inputs.input_ids))
        picks = cast(torch.Tensor, inputs.sample_indices)
        hidden = self.model.mtp_step_embedded(target_hidden[picks], embedded[picks])
        drafts = [self.model.greedy(hidden)]
        settings = contracts.current_config()
        checked = settings.mode is not contracts.Mode.OFF
        every_step = settings.depth is contracts.Depth.FULL
        for step in range(1, self.mtp_k):
            metadata = draft_step_metadata(inputs, step, self.fault)
            if checked and (every_step or step == self.mtp_k - 1):
                # A draft step's hand-over, with its attention metadata. Each step's is
                # the previous one's advanced by one, so a step left behind leaves every
                # later one behind: the last shows it, and below full depth it alone is
                # built (one object per step instead of mtp_k - 1).
                CLOCK.checking(draft_step_input, inputs, step, drafts[-1], metadata)
            hidden = self.model.mtp_step(hidden, drafts[-1], context_offsets(metadata))
            drafts.append(self.model.greedy(hidden))
        return CLOCK.build(contracts.DrafterOutput, mtp_k=self.mtp_k,
                        vocab_size=self.model.vocab_size, seq_ids=inputs.seq_ids,
                        draft_token_ids=torch.stack(drafts, dim=1), num_proposed=num_proposed)
