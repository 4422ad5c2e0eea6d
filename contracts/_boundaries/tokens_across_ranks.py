"""``TokensAcrossRanks``: one rank's copy of the token counts gathered from every rank.

Under data-parallel attention every rank learns, each step, how many tokens every rank
runs (vLLM's ``num_tokens_across_dp``, SGLang's ``global_num_tokens``, ATOM's DP
metadata): the MoE layers' all-gather is sized from it, and so are the padding, the
graph a rank replays and the dummy batch of an idle one. A rank reads the vector at its
own ``dp_rank``, so the vector must have one entry per rank, hold this rank's own count
there, and count nothing negative; that every rank holds the same vector is checked
across ranks (SG710, :func:`specguard.adapters.check_ranks`).
"""

from __future__ import annotations

from specguard.contracts._boundaries._backend_neutral import host_value, value_text
from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._config import Depth
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary, rule, structural_rule
from specguard.contracts._core._values import ValueChecks
from specguard.contracts._core._violation import Finding

__all__ = ["TokensAcrossRanks"]

structural_rule(
    "SG707", "one token count per data-parallel rank",
    boundary=Boundary.RANKS,
    why="""Every rank reads the vector at its own rank and sizes the step's collectives
    from all of it. A vector of another length (a data-parallel group's size taken from
    another group, a vector built for the target model handed to the drafter of a
    different group) reads a missing entry or sizes the gather for ranks that are not
    there.""",
    bug="vllm-ascend #12640: once DP padded the drafter's tokens, shapes sized from the "
    "DP token counts disagreed with the drafter's inputs ('dim0 must be equal').",
)


@boundary_object(Boundary.RANKS, minimums={"dp_size": 1, "dp_rank": 0, "own_tokens": 0})
class TokensAcrossRanks(BoundaryObject):
    """This rank's copy of every data-parallel rank's token count for one forward."""

    dp_size: int
    """Data-parallel ranks in the group."""
    dp_rank: int
    """This rank's index in the group, in ``[0, dp_size)``."""
    own_tokens: int
    """The tokens this rank runs in the forward (after its padding, where it pads)."""
    tokens_across_ranks: Index[Array, "dp_size"]
    """Entry ``r``: the tokens rank ``r`` runs; entry ``dp_rank`` is this rank's own."""


_ACROSS = ("TokensAcrossRanks",)


@rule("SG708", "this rank's entry is its own token count",
      boundary=Boundary.RANKS, applies_to=_ACROSS,
      fields={"tokens_across_ranks", "dp_rank", "own_tokens"},
      bug="vLLM #35294: the speculator kept its own num_tokens_after_padding instead of "
      "the agreed count when the target fell back to eager mode, and the DP group hung; "
      "vLLM #27837: drafter padding inconsistent across DP ranks hung or crashed.",
      depth=Depth.ESSENTIAL)
def _own_entry(counts: TokensAcrossRanks, values: ValueChecks) -> Finding | None:
    """A rank sizes its share of the step's collectives from its own entry while the
    others size theirs from the same entry of their copies. An entry that is not the
    count this rank really runs (a stale vector from the previous forward, the target's
    vector reused for the drafter, another rank's index) gives the all-gather buffers of
    different lengths: NCCL hangs, gloo aborts, or tokens are cut off."""
    across, rank = counts.tokens_across_ranks, int(counts.dp_rank)
    if rank >= across.shape[0]:
        return Finding(f"rank {rank} has no entry in a vector of {across.shape[0]}",
                       "dp_rank", expected=f"0 <= dp_rank < dp_size={counts.dp_size}",
                       actual=str(rank))
    entry = across[rank:rank + 1]
    return values.any_true(entry != counts.own_tokens, lambda _: Finding(
        f"entry {rank} (this rank's){value_text(across, rank)}", "tokens_across_ranks",
        expected=f"own_tokens={counts.own_tokens}", actual=str(host_value(across, rank))))


@rule("SG709", "no rank's token count is negative",
      boundary=Boundary.RANKS, applies_to=_ACROSS, fields={"tokens_across_ranks"},
      bug="vLLM #27837: a -1 'no padding' marker among the DP counts reached the padding "
      "decision of the drafter's dummy run.", depth=Depth.ESSENTIAL)
def _not_negative(counts: TokensAcrossRanks, values: ValueChecks) -> Finding | None:
    """The counts size buffers and pick graphs: the maximum sets the padded size, the
    sum the gathered length. A negative entry (an unset marker, a wrapped int) shrinks
    both below what some rank sends."""
    across = counts.tokens_across_ranks
    return values.below(across, 0, lambda i: Finding(
        f"entry {i}{value_text(across, i)}", "tokens_across_ranks", expected=">= 0"))
