"""The MTP head as a drafter: padded input like vLLM's, ``mtp_k`` autoregressive steps.

The drafter sees every seq of the step, chunked prefills included (padded speculation):
its input is the target's token stream shifted left by one, with each seq's newest token
written at the position it samples from. A seq in the middle of its prompt has no new
token; its row is discarded, and the next prompt token stands in so that every id the
head embeds is a real one.
"""

from __future__ import annotations

from typing import cast

import torch

from specguard import contracts
from specguard.runner import faults
from specguard.runner._timing import CLOCK
from specguard.runner.model import TinyLM

__all__ = ["Drafter", "drafter_input", "next_token_ids"]


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
    num_rejected: torch.Tensor, vocab_size: int,
) -> contracts.DrafterInput:
    """Shift the target's ids left by one and write each seq's newest token where it
    samples: after its last accepted token (``num_rejected`` slots before its span end)."""
    starts = cast(torch.Tensor, model_input.query_start_loc)
    sample_indices = starts[1:] - 1 - num_rejected
    ids = torch.roll(cast(torch.Tensor, model_input.input_ids), -1)
    ids[sample_indices] = next_tokens
    return CLOCK.build(
        contracts.DrafterInput, vocab_size=vocab_size, num_tokens=model_input.num_tokens,
        seq_ids=model_input.seq_ids, input_ids=ids, positions=model_input.positions,
        query_start_loc=starts, sample_indices=sample_indices)


class Drafter:
    """Proposes ``mtp_k`` tokens per seq with the model's MTP head."""

    def __init__(self, model: TinyLM, mtp_k: int) -> None:
        self.model = model
        self.mtp_k = mtp_k

    @torch.inference_mode()
    def propose(self, inputs: contracts.DrafterInput,
                target_hidden: torch.Tensor) -> contracts.DrafterOutput:
        """Drafts ``[num_seqs, mtp_k]``: step 0 from the target's hidden state at each
        sample index, later steps from the head's own state and its previous draft."""
        embedded = self.model.embed(cast(torch.Tensor, inputs.input_ids))
        picks = cast(torch.Tensor, inputs.sample_indices)
        hidden = self.model.mtp_step_embedded(target_hidden[picks], embedded[picks])
        drafts = [self.model.greedy(hidden)]
        for _ in range(self.mtp_k - 1):
            hidden = self.model.mtp_step(hidden, drafts[-1])
            drafts.append(self.model.greedy(hidden))
        return CLOCK.build(contracts.DrafterOutput, mtp_k=self.mtp_k,
                        vocab_size=self.model.vocab_size, seq_ids=inputs.seq_ids,
                        draft_token_ids=torch.stack(drafts, dim=1))
