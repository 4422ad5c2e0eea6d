"""Contracts across data-parallel ranks: what every rank must agree on, step by step.

Data-parallel ranks schedule their own requests but run each step's collectives together:
under DP attention the MoE layers gather every rank's tokens, padded to one size, and a
rank with nothing to do runs a dummy step so the others do not wait for it. If the ranks
disagree on the step, on ``mtp_k``, on the padded size or on what an idle rank runs, the
step's collectives get mismatched shapes: NCCL hangs until its watchdog fires, gloo
aborts a process. Nothing on a single rank looks wrong.

Each step every rank describes itself in one fixed-size int64 row (:class:`RankStep`);
the engine all-gathers the rows (one small collective, before the step's own
collectives, and none at all with contracts off) and every rank checks the same
matrix with :func:`check_ranks`. Every rank therefore reaches the same verdict at the
same point, and in strict mode all of them raise the same ``ContractViolation``, naming
the rank that broke the rule, instead of leaving the healthy ones inside a collective::

    row = RankStep(step=7, mtp_k=3, num_tokens=12, padded_tokens=12, dummy=False,
                   dummy_tokens=4, seq_ids=batch_seq_ids,
                   tokens_across_ranks=num_tokens_across_dp).row(id_slots=max_num_seqs,
                                                                 across_slots=dp_size)
    rows = all_gather(row)            # [num_ranks, width]: the engine's collective
    check_ranks(rows)                 # SG701-SG706, SG710: the same verdict on every rank

Each rank's copy of the token counts gathered from every rank (vLLM's
``num_tokens_across_dp``, SGLang's ``global_num_tokens``), when the engine passes it,
travels in the row too: every rank must hold the same vector (SG710), or each sizes the
step's collectives from a different one. The rank checks its own copy first, on its own
(:class:`specguard.contracts.TokensAcrossRanks`, SG707-SG709).

A rank that one of its own checks stopped (its batch, its forward) must not leave the
others inside the step's collectives: it finishes them, then reports the rule in the
``stopped`` column of its next row, and every rank stops there on SG701, naming it.

Seq ids unique across ranks (SG706) is a value check: only at full depth does the row
carry the step's seq ids, padded with -1 to ``id_slots`` (the engine's ``max_num_seqs``),
so the check is exact and the collective keeps one fixed size. At metadata depth the row
is the eight header fields alone. Every rank runs under the same contract settings (they
are set once, before the ranks start), so every rank's row has the same width.

Which rank broke a rule: the first whose value differs from the most common one (on a
tie, from the lowest rank's value). With two ranks that disagree, the report names rank
1 and lists what every rank reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._host import host_array
from specguard.contracts import (
    Array,
    Bool,
    Boundary,
    BoundaryObject,
    Depth,
    Finding,
    Index,
    ValueChecks,
    boundary_object,
    checking,
    describe,
    report,
    rule,
)

__all__ = ["HEADER", "RankAgreement", "RankStep", "check_ranks", "describe_rows"]

#: The columns every row starts with, in order; the rank's copy of the token counts
#: across ranks (``across`` entries), then seq ids (full depth) follow.
HEADER = ("stopped", "step", "mtp_k", "num_tokens", "padded_tokens", "dummy",
          "dummy_tokens", "num_seqs", "across")
_NO_ID = -1


@dataclass(frozen=True)
class RankStep:
    """What one rank is about to run in one step: the metadata the ranks compare."""

    step: int
    """The group's step index on this rank (every step counts, dummy steps included)."""
    mtp_k: int
    """Draft tokens per decode seq this rank runs with."""
    num_tokens: int
    """Tokens this rank runs: its batch, or its dummy batch when idle."""
    padded_tokens: int
    """The size this rank pads its tokens to for the step's collectives."""
    dummy: bool
    """Whether this rank is idle and runs a dummy step."""
    dummy_tokens: int
    """How many tokens this rank's convention gives a dummy step."""
    seq_ids: Sequence[int] | np.ndarray = field(default_factory=tuple)
    """The seqs of this rank's batch (compared only at full depth)."""
    stopped: int = 0
    """The number of the rule a violation of which stopped this rank (101 for SG101), or
    0 while it runs: how a rank stopped by its own checks stops the others with it."""
    tokens_across_ranks: Sequence[int] | np.ndarray | None = None
    """This rank's copy of every rank's token count for the step, when the engine keeps
    one (compared across ranks at every depth)."""

    def row(self, id_slots: int = 0, across_slots: int | None = None) -> np.ndarray:
        """The int64 row to gather: the header, the rank's copy of the token counts, then
        ``id_slots`` seq ids padded with -1.

        A batch with more seqs than slots sends the first ``id_slots`` of them.
        ``across_slots`` (the data-parallel size) gives the copy a fixed width: a copy of
        another length is cut or padded with -1 there, its true length still in the
        header, so that every rank's row has the same width and the gather itself cannot
        fail on it (``check_ranks`` then names the rank whose copy differs).
        """
        header = {"stopped": self.stopped, "step": self.step, "mtp_k": self.mtp_k,
                  "num_tokens": self.num_tokens, "padded_tokens": self.padded_tokens,
                  "dummy": self.dummy, "dummy_tokens": self.dummy_tokens}
        ids = _seq_ids(self.seq_ids)
        across = (np.zeros(0, dtype=np.int64) if self.tokens_across_ranks is None
                  else _int64s(self.tokens_across_ranks, "tokens_across_ranks"))
        slots = across.shape[0] if across_slots is None else max(int(across_slots), 0)
        width = len(HEADER) + slots
        row = np.full(width + id_slots, _NO_ID, dtype=np.int64)
        row[:len(HEADER)] = (*(_header_value(name, value) for name, value in header.items()),
                             ids.shape[0], across.shape[0])
        kept = across[:slots]
        row[len(HEADER):len(HEADER) + kept.shape[0]] = kept
        shown = ids[:id_slots]
        row[width:width + shown.shape[0]] = shown
        return row


@boundary_object(Boundary.RANKS)
class RankAgreement(BoundaryObject):
    """What every data-parallel rank reported for one step: entry ``r`` is rank ``r``.

    Built by :func:`check_ranks` from the gathered rows, on every rank alike.
    """

    stopped: Index[Array, "num_ranks"]
    """The rule number that stopped each rank (101 for SG101), or 0 while it runs."""
    step: Index[Array, "num_ranks"]
    """The step index each rank is at."""
    mtp_k: Index[Array, "num_ranks"]
    """The ``mtp_k`` each rank runs with."""
    num_tokens: Index[Array, "num_ranks"]
    """Tokens each rank runs this step (its dummy batch when idle)."""
    padded_tokens: Index[Array, "num_ranks"]
    """The size each rank pads its tokens to for the step's collectives."""
    dummy: Bool[Array, "num_ranks"]
    """Which ranks are idle and run a dummy step."""
    dummy_tokens: Index[Array, "num_ranks"]
    """The tokens each rank's convention gives a dummy step."""
    num_seqs: Index[Array, "num_ranks"]
    """Seqs in each rank's batch."""
    across: Index[Array, "num_ranks"]
    """How many token counts each rank's row carries (0 when its engine keeps none)."""
    seq_ids: Index[Array, "num_ranks id_slots"] | None = None
    """Each rank's seq ids, -1 padded (full depth only)."""
    tokens_across_ranks: Index[Array, "num_ranks num_counts"] | None = None
    """Row ``r``: rank ``r``'s copy of every rank's token count, when the rows carry one."""


_INT64 = range(-(2**63), 2**63)


def _header_value(name: str, value: Any) -> int:
    """One header entry as an int64; anything else is reported (SG001, SG006) and sent as
    -1, which every other rank's check then sees as a disagreement."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if not isinstance(value, int | np.integer):
        report("RankStep", [("SG001", Finding(
            f"{name} must be an integer, got {type(value).__name__}", name))],
            boundary=Boundary.RANKS.value)
        return _NO_ID
    if int(value) not in _INT64:
        report("RankStep", [("SG006", Finding(
            f"{name}={describe(int(value))} does not fit the int64 row the ranks gather",
            name, expected="-2**63 <= value < 2**63"))], boundary=Boundary.RANKS.value)
        return _NO_ID
    return int(value)


def _seq_ids(values: Any) -> np.ndarray:
    """The seq ids as int64, or none (reported) when they are not integers of that range."""
    return _int64s(values, "seq_ids")


def _int64s(values: Any, name: str) -> np.ndarray:
    """``values`` as int64, or none (reported) when they are not integers of that range.

    A float, bool or string array is refused (SG001), not cast: a cast would truncate
    1.5 to 1 and turn NaN into an arbitrary id."""
    try:
        given = np.asarray(values)
    except (TypeError, ValueError) as error:  # ragged, or not array-like at all
        return _not_sent(name, error)
    if given.size == 0:
        return np.zeros(0, dtype=np.int64)  # an empty list reads as float64: no value
    if given.dtype.kind not in "iuO":
        report("RankStep", [("SG001", Finding(
            f"{name} must be integers, got {given.dtype} values", name,
            expected="integers in [-2**63, 2**63)"))], boundary=Boundary.RANKS.value)
        return np.zeros(0, dtype=np.int64)
    try:
        if given.dtype.kind == "O":  # Python ints past int64, or objects: each one read
            return np.asarray(values, dtype=np.int64).reshape(-1)
        if given.dtype.kind == "u" and int(given.max()) > _INT64.stop - 1:
            raise OverflowError(f"{int(given.max())} is past int64")
    except (OverflowError, TypeError, ValueError) as error:
        return _not_sent(name, error)
    return given.astype(np.int64, copy=False).reshape(-1)


def _not_sent(name: str, error: Exception) -> np.ndarray:
    report("RankStep", [("SG006", Finding(
        f"{name} cannot be sent as int64: {type(error).__name__}: {error}", name,
        expected="integers in [-2**63, 2**63)"))], boundary=Boundary.RANKS.value)
    return np.zeros(0, dtype=np.int64)


def check_ranks(rows: Any) -> RankAgreement:
    """Check the gathered rows of one step (``[num_ranks, width]`` int64) under the mode.

    Strict raises ``ContractViolation`` (the same one on every rank, since every rank
    checks the same rows); warn logs and returns; off checks nothing. Rows of the wrong
    shape are reported as a structural violation, never as an IndexError.

    The header rules run at every depth: comparing a few integers per rank is metadata.
    Seq ids are compared only where the rows carry them, which engines do at full depth.
    """
    fields = _fields(rows)
    ranks = fields["step"]
    if isinstance(ranks, np.ndarray) and ranks.shape[0] == 0:
        # A gather holds at least the gathering rank's own row: none is a broken gather.
        report("RankAgreement", [("SG003", Finding(
            "the gathered rows hold no rank: every rank sends its own row, so a gather "
            "returns at least one", "step", expected="num_ranks >= 1", actual="0"))],
            boundary=Boundary.RANKS.value)
    with checking(depth=Depth.FULL):
        return build(RankAgreement, fields)


def _fields(rows: Any) -> dict[str, Any]:
    matrix = host_array(rows)
    width = len(HEADER)
    if (matrix is None or matrix.ndim != 2 or matrix.shape[1] < width
            or not np.issubdtype(matrix.dtype, np.integer)):
        # Handed on as they are: the structural rules name what is wrong with them.
        return {name: rows for name in HEADER}
    fields: dict[str, Any] = {name: matrix[:, i] for i, name in enumerate(HEADER)}
    fields["dummy"] = matrix[:, HEADER.index("dummy")] != 0
    carried = fields["across"]
    counts = int(carried[0]) if carried.shape[0] else 0
    if not bool((carried == counts).all()) or not 0 <= counts <= matrix.shape[1] - width:
        return fields  # where the counts end is unknown: SG710 names the rank that differs
    if counts:
        fields["tokens_across_ranks"] = matrix[:, width:width + counts]
        width += counts
    if matrix.shape[1] > width:
        fields["seq_ids"] = matrix[:, width:]
    return fields


def describe_rows(rows: Any) -> list[str]:
    """One line per rank saying what it reported: ``rank 1: step 5, mtp_k 2, ...``."""
    matrix = host_array(rows)
    if matrix is None or matrix.ndim != 2 or matrix.shape[1] < len(HEADER):
        return [f"unreadable rows: {rows!r}"]
    lines = []
    for rank, row in enumerate(matrix.tolist()):
        stopped, step, k, tokens, padded, dummy, dummy_tokens, seqs, across = \
            row[:len(HEADER)]
        work = f"dummy step of {tokens} tokens" if dummy else f"{seqs} seqs, {tokens} tokens"
        state = f", stopped by SG{stopped:03d}" if stopped else ""
        copy = row[len(HEADER):len(HEADER) + max(across, 0)]
        counts = f", token counts {copy}" if copy else ""
        lines.append(f"rank {rank}: step {step}, mtp_k {k}, {work}, padded to {padded} "
                     f"(dummy steps run {dummy_tokens} tokens){counts}{state}")
    return lines


# --- the rules ------------------------------------------------------------------------------


def _ranks(ranks: Sequence[int]) -> str:
    listed = [str(r) for r in ranks]
    if len(listed) == 1:
        return f"rank {listed[0]}"
    return "ranks " + ", ".join(listed[:-1]) + " and " + listed[-1]


def _tokens(count: int) -> str:
    return f"{count} token{'' if count == 1 else 's'}"


def _odd_one(values: np.ndarray) -> tuple[int, int, list[int]] | None:
    """``(rank, reference value, ranks holding it)`` for the first rank that differs from
    the most common value (on a tie, the lowest rank's value); None when all agree."""
    if values.shape[0] == 0 or bool((values == values[0]).all()):
        return None
    found, first, counts = np.unique(values, return_index=True, return_counts=True)
    best = counts == counts.max()
    reference = int(found[best][np.argmin(first[best])])
    odd = int(np.flatnonzero(values != reference)[0])
    return odd, reference, np.flatnonzero(values == reference).tolist()


def _disagreement(values: Any, field: str, says: Any) -> Finding | None:
    """The first rank whose ``field`` differs from the others', described by ``says``:
    ``says(value, plural)`` is what a rank holding ``value`` does (``runs mtp_k 3``)."""
    array = np.asarray(values)
    odd = _odd_one(array)
    if odd is None:
        return None
    rank, reference, agreeing = odd
    own = int(array[rank])
    return Finding(f"rank {rank} {says(own, False)}, but {_ranks(agreeing)} "
                   f"{says(reference, len(agreeing) > 1)}", field,
                   expected=str(reference), actual=str(own))


def _verb(singular: str, plural: str) -> Any:
    return lambda value, many: f"{plural if many else singular} {value}"


@rule("SG701", "no rank has stopped on a contract violation", boundary=Boundary.RANKS,
      applies_to=("RankAgreement",), fields={"stopped"}, depth=Depth.METADATA,
      bug="vLLM #46994 (review): one rank's mismatched broadcast deadlocked the group until "
      "the 600 s NCCL watchdog took it down, and the healthy ranks showed only secondary "
      "errors (gloo 'Connection closed', 'Worker died unexpectedly').")
def _none_stopped(ranks: RankAgreement, values: ValueChecks) -> Finding | None:
    """A rank whose own checks stop it leaves the others waiting in the step's
    collectives. It finishes the step's collectives, says so in its next row, and every
    rank stops at that same point, naming it, instead of hanging until a watchdog or
    dying on a closed connection far from the cause."""
    stopped = np.asarray(ranks.stopped)
    hit = np.flatnonzero(stopped != 0)
    if hit.size == 0:
        return None
    rank = int(hit[0])
    return Finding(f"rank {rank} stopped on a violation of SG{int(stopped[rank]):03d}; every "
                   "rank stops with it", "stopped", expected="0", actual=str(int(stopped[rank])))


@rule("SG702", "every rank is at the same step", boundary=Boundary.RANKS,
      applies_to=("RankAgreement",), fields={"step"}, depth=Depth.METADATA,
      bug="vllm-ascend #2582: a DP server hung when there were fewer requests than ranks, "
      "an idle rank not stepping with the others; vLLM #40589: one DP rank skipped the "
      "drafter for a step while the others ran its dummy run, and the group hung.")
def _same_step(ranks: RankAgreement, values: ValueChecks) -> Finding | None:
    """Collectives pair up by order, not by name: a rank that skipped a step, or ran one
    twice, hands its tokens to the other ranks' next collective. Shapes then disagree
    and the group hangs (NCCL) or aborts (gloo), or, worse, they happen to agree and
    every rank computes with another step's tokens."""
    return _disagreement(ranks.step, "step", _verb("is at step", "are at step"))


@rule("SG703", "every rank runs the same mtp_k", boundary=Boundary.RANKS,
      applies_to=("RankAgreement",), fields={"mtp_k"}, depth=Depth.METADATA,
      bug="vLLM #40589: one DP rank skipped proposing drafts for a step (its seqs were "
      "near max_model_len) while the others drafted: the ranks disagreed on speculation "
      "and hung; xLLM #2255: idle ranks vetoed speculation for the whole DP group.")
def _same_mtp_k(ranks: RankAgreement, values: ValueChecks) -> Finding | None:
    """``mtp_k`` fixes the shape of everything speculative that the ranks run together:
    decode spans of ``mtp_k + 1`` tokens, the drafter's forwards, the uniform-decode
    graphs and the dummy batch of an idle rank. A rank that drafts a different number of
    tokens pads to a different size and launches different collectives."""
    return _disagreement(ranks.mtp_k, "mtp_k", _verb("runs mtp_k", "run mtp_k"))


@rule("SG704", "every rank pads to the same size, which fits every rank's tokens",
      boundary=Boundary.RANKS, applies_to=("RankAgreement",),
      fields={"padded_tokens", "num_tokens"}, depth=Depth.METADATA,
      bug="vLLM #25906: the DP dummy run chose its CUDA graph by the local token count "
      "instead of num_tokens_after_padding, so ranks ran different graphs and hung; "
      "vllm-ascend #1636: max_num_tokens_across_dp computed from a local pad size "
      "differed across DP ranks.")
def _same_padding(ranks: RankAgreement, values: ValueChecks) -> Finding | None:
    """Under DP attention the MoE layers all-gather every rank's tokens padded to one
    size agreed from every rank's count. A rank that pads to another size sends a buffer
    of another length (NCCL hangs, gloo aborts); a size smaller than some rank's batch
    cuts that rank's tokens off."""
    padded, tokens = np.asarray(ranks.padded_tokens), np.asarray(ranks.num_tokens)
    if padded.shape[0] == 0:
        return None
    largest = int(tokens.max())
    fits = padded >= largest
    if fits.any() and not fits.all():
        # The rank whose size cannot hold the largest batch is the one that got it wrong.
        rank = int(np.flatnonzero(~fits)[0])
        sizes, counts = np.unique(padded[fits], return_counts=True)
        reference = int(sizes[np.argmax(counts)])
        agreeing = np.flatnonzero(padded == reference).tolist()
        holder = int(np.argmax(tokens))
        return Finding(f"rank {rank} pads to {int(padded[rank])}, fewer than the {largest} "
                       f"tokens of rank {holder}; {_ranks(agreeing)} pad to {reference}",
                       "padded_tokens", expected=str(reference), actual=str(int(padded[rank])))
    found = _disagreement(padded, "padded_tokens", _verb("pads to", "pad to"))
    if found is not None or fits.all():
        return found
    rank = int(np.argmax(tokens))
    return Finding(f"rank {rank} runs {largest} tokens, more than the {int(padded[rank])} "
                   "every rank pads to", "padded_tokens", expected=f">= {largest}",
                   actual=str(int(padded[rank])))


@rule("SG705", "every rank follows the same dummy-step convention",
      boundary=Boundary.RANKS, applies_to=("RankAgreement",),
      fields={"dummy", "dummy_tokens", "num_tokens"}, depth=Depth.METADATA,
      bug="vLLM #35376: idle DP ranks ran _dummy_run(1) while busy ranks ran uniform "
      "decode spans of 1 + num_speculative_tokens, so the group fell off its CUDA graphs; "
      "vllm-ascend #15347: the idle rank's one-token dummy downgraded every active rank "
      "to an eager forward.")
def _same_dummy(ranks: RankAgreement, values: ValueChecks) -> Finding | None:
    """An idle rank still joins the step's collectives with a dummy batch. If ranks
    disagree on what that batch is, the group's shape and graph choice depend on which
    rank happens to be idle: mismatched collectives, or a silent fall to a slow path."""
    found = _disagreement(ranks.dummy_tokens, "dummy_tokens", lambda value, many:
                          f"run{'' if many else 's'} dummy steps of {_tokens(value)}")
    if found is not None:
        return found
    dummy, tokens = np.asarray(ranks.dummy), np.asarray(ranks.num_tokens)
    expected = np.asarray(ranks.dummy_tokens)
    off = np.flatnonzero(dummy & (tokens != expected))
    if off.size == 0:
        return None
    rank = int(off[0])
    return Finding(f"rank {rank} runs a dummy step of {_tokens(int(tokens[rank]))}, but its "
                   f"convention is {int(expected[rank])}", "num_tokens",
                   expected=str(int(expected[rank])), actual=str(int(tokens[rank])))


@rule("SG706", "seq ids are unique across ranks", boundary=Boundary.RANKS,
      applies_to=("RankAgreement",), fields={"seq_ids"},
      bug="vLLM #27987 (after #27723): request ids, the key of every table in the "
      "engine, collided when several clients each numbered their own requests.")
def _unique_across_ranks(ranks: RankAgreement, values: ValueChecks) -> Finding | None:
    """Outputs, KV transfers and aborts are routed by seq id. An id that two ranks both
    hold sends one rank's tokens to the other's request: the front end keeps whichever
    arrives last, and nothing crashes."""
    ids = ranks.seq_ids
    if ids is None:
        return None
    matrix = np.asarray(ids)
    owner = np.repeat(np.arange(matrix.shape[0]), matrix.shape[1])
    flat = matrix.reshape(-1)
    real = flat >= 0
    flat, owner = flat[real], owner[real]
    if flat.size == 0:
        return None
    order = np.lexsort((owner, flat))
    flat, owner = flat[order], owner[order]
    clash = np.flatnonzero((flat[1:] == flat[:-1]) & (owner[1:] != owner[:-1]))
    if clash.size == 0:
        return None
    at = int(clash[0])
    seq, first, second = int(flat[at]), int(owner[at]), int(owner[at + 1])
    return Finding(f"rank {second} schedules it as well as rank {first}",
                   "seq_ids", seq_id=seq, expected=f"seq {seq} on one rank",
                   actual=f"on ranks {first} and {second}")


@rule("SG710", "every rank holds the same token counts across ranks",
      boundary=Boundary.RANKS, applies_to=("RankAgreement",),
      fields={"tokens_across_ranks", "across"}, depth=Depth.METADATA,
      bug="vLLM #35294: when the target fell back to eager mode each DP rank kept its own "
      "num_tokens_after_padding, so the speculator's num_tokens_across_dp differed across "
      "ranks and the group hung until it was all-reduced; vllm-ascend #12640: the "
      "drafter's DP-padded counts disagreed with its inputs.")
def _same_counts(ranks: RankAgreement, values: ValueChecks) -> Finding | None:
    """Each rank sizes the step's collectives from its own copy of every rank's token
    count: the padded size, the gather's offsets, the graph it replays. Copies that
    differ (one stale, one rebuilt locally, one from another forward) mean ranks that
    each agree with themselves and launch collectives of different shapes. Carried in
    the same row as the header, so comparing costs no extra collective."""
    carried = np.asarray(ranks.across)
    found = _disagreement(carried, "across", lambda value, many:
                          f"send{'' if many else 's'} {value} token counts")
    if found is not None or ranks.tokens_across_ranks is None:
        return found
    copies = np.asarray(ranks.tokens_across_ranks)
    if copies.shape[0] < 2 or bool((copies == copies[0]).all()):
        return None
    # The most common copy is the reference; the first rank holding another is named.
    found_rows, first, counts = np.unique(copies, axis=0, return_index=True,
                                          return_counts=True)
    best = counts == counts.max()
    reference = found_rows[best][np.argmin(first[best])]
    same = (copies == reference).all(axis=1)
    rank = int(np.flatnonzero(~same)[0])
    agreeing = np.flatnonzero(same).tolist()
    entry = int(np.flatnonzero(copies[rank] != reference)[0])
    return Finding(f"rank {rank} holds {copies[rank].tolist()}, but {_ranks(agreeing)} "
                   f"hold{'' if len(agreeing) > 1 else 's'} {reference.tolist()} "
                   f"(entry {entry} differs)", "tokens_across_ranks",
                   expected=str(int(reference[entry])), actual=str(int(copies[rank, entry])))
