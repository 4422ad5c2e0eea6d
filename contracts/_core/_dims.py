"""Named dimensions shared across the fields of every boundary object.

Each dimension names the rule that owns it: when two fields (or a field and a scalar)
disagree on a dimension, the violation carries that rule's code, so a short draft array
reads as "one draft row per decode seq" rather than a generic shape error.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DIMENSIONS", "Dim", "dimension"]


@dataclass(frozen=True)
class Dim:
    """A named dimension: what it counts and which rule guards agreement on it."""

    name: str
    meaning: str
    rule: str = "SG004"
    maximum: int | None = None


DIMENSIONS: dict[str, Dim] = {
    d.name: d
    for d in (
        Dim("num_seqs", "sequences in the batch, in batch order", "SG105"),
        Dim("num_decode", "decode sequences in the batch, in batch order", "SG101"),
        Dim("num_tokens", "scheduled tokens in the flat token stream", "SG104"),
        Dim(
            "mtp_k",
            "draft tokens proposed per sequence (num_speculative_tokens)",
            "SG102",
            # vLLM's MAX_SPEC_LEN: no engine verifies longer rows, and the bound keeps
            # a corrupt mtp_k from sizing a multi-gigabyte draft buffer.
            maximum=128,
        ),
        Dim("max_blocks", "columns of the padded block table"),
        Dim("vocab_size", "token ids the embedding accepts: [0, vocab_size)"),
        Dim("dp_size", "data-parallel ranks, one token count each", "SG707"),
    )
}


def dimension(name: str) -> Dim:
    """The registered dimension, or an ad-hoc one guarded by the generic shape rule."""
    return DIMENSIONS.get(name) or Dim(name, "")
