"""``VerifyOutput``: the rejection sampler's rows, handed to the drafter and scheduler."""

from __future__ import annotations

from specguard.contracts._boundaries._backend_neutral import (
    arange_like,
    host_value,
    row_col,
    value_text,
)
from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary, rule
from specguard.contracts._core._values import ValueChecks, scalar_mask
from specguard.contracts._core._violation import Finding

__all__ = ["PLACEHOLDER", "VerifyOutput"]

#: The padding value after a row's last real token (vLLM's ``PLACEHOLDER_TOKEN_ID``).
PLACEHOLDER = -1


@boundary_object(Boundary.VERIFY, minimums={"mtp_k": 1, "vocab_size": 1})
class VerifyOutput(BoundaryObject):
    """Verified tokens per decode seq: ``(num_decode, mtp_k + 1)`` left-packed rows.

    Row ``i`` holds ``num_accepted[i]`` accepted drafts, then exactly one correction (or
    bonus) token, then ``-1`` padding. Consumers take ``num_accepted + 1`` tokens and the
    last of them is the next anchor.
    """

    mtp_k: int
    """Draft tokens per decode seq."""
    vocab_size: int
    """Vocabulary size; every real token is in ``[0, vocab_size)``."""
    seq_ids: Index[Array, "num_decode"]
    """The verified decode seqs, in batch order."""
    token_ids: Index[Array, "num_decode mtp_k+1"]
    """Accepted drafts, one correction/bonus token, then ``-1`` padding."""
    num_accepted: Index[Array, "num_decode"]
    """Accepted drafts per seq, in ``[0, mtp_k]``."""


_VERIFY = ("VerifyOutput",)


@rule("SG201", "accepted counts are within [0, mtp_k]",
      boundary=Boundary.VERIFY, applies_to=_VERIFY, fields={"num_accepted", "mtp_k"},
      bug="vLLM #50021: num_accepted - 1 == -1 used as a state index (GDN/KDA spec decode).")
def _accepted(out: VerifyOutput, values: ValueChecks) -> Finding | None:
    """The accepted count indexes the next anchor (row[a]) and sets how far the KV cache
    rolls back (k - a rejected); outside [0, k] both land in another row or slot."""
    accepted = out.num_accepted
    return values.outside(accepted, 0, int(out.mtp_k) + 1, lambda i: Finding(
        f"accepted count{value_text(accepted, i)}", "num_accepted", position=i,
        expected=f"0..mtp_k={out.mtp_k}"))


@rule("SG202", "verify rows are accepted drafts, one token, then -1 padding",
      boundary=Boundary.VERIFY, applies_to=_VERIFY,
      fields={"token_ids", "num_accepted", "vocab_size", "mtp_k"},
      bug="vLLM I3: consumers index valid_count - 1; a hole or a missing token shifts "
      "token_indices_to_sample into the previous request.")
def _layout(out: VerifyOutput, values: ValueChecks) -> Finding | None:
    """Every consumer (the scheduler's delivery, the drafter's next-token pick, the
    acceptance statistics) trusts the layout instead of scanning for -1: real tokens in
    the first num_accepted + 1 columns, -1 after them, nothing else."""
    tokens, width = out.token_ids, int(out.mtp_k) + 1
    columns = arange_like(tokens, width)
    real = columns[None, :] <= out.num_accepted[:, None]
    bad_real = real & (scalar_mask(tokens, "lt", 0) | scalar_mask(tokens, "ge", out.vocab_size))
    bad_pad = ~real & (tokens != PLACEHOLDER)

    def explain(i: int) -> Finding:
        row, col = row_col(i, width)
        accepted = host_value(out.num_accepted, row)
        kind = "padding" if accepted is not None and col > accepted else "token"
        return Finding(f"column {col} ({kind}){value_text(tokens, i)}", "token_ids",
                       position=row, expected=f"{accepted} accepted + 1 token, then -1")

    return values.any_true(bad_real | bad_pad, explain)

