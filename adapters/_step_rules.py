"""The relations between consecutive steps, as boundary objects with their rules.

The step tracker derives these small host objects from the previous step's state and the
objects crossing now, and builds them, which validates them like any boundary object:
by mode, at each rule's depth, naming the seq and its batch position. Rules
SG601-SG608, SG660 and SG661.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from specguard.contracts import (
    REGISTRY,
    Array,
    Bool,
    Boundary,
    BoundaryObject,
    Depth,
    Finding,
    Index,
    ValueChecks,
    boundary_object,
    current_config,
    rule,
)
from specguard.contracts.ops import host_value

__all__ = ["DraftRows", "RecomputedTokens", "StepTransition", "VerifyRows", "runs"]


@boundary_object(Boundary.SCHEDULE, minimums={"mtp_k": 1})
class StepTransition(BoundaryObject):
    """How this step's seqs continue from the step before.

    Per-seq arrays follow this step's batch order; per-row arrays follow its decode seqs
    in batch order. Built by :class:`specguard.adapters.step_tracker.StepTracker`.
    """

    mtp_k: int
    """Draft tokens per decode seq."""
    draft_placeholder: int | None = None
    """A draft value the runner overwrites from its previous-step buffers (vLLM's ``-1``)."""
    seq_ids: Index[Array, "num_seqs"]
    """This step's seqs, in batch order."""
    prev_rows: Index[Array, "num_seqs"]
    """Each seq's row in the previous forward, or -1 when it was not there."""
    starts: Index[Array, "num_seqs"]
    """First scheduled position of each seq this step (context length minus scheduled)."""
    expected_starts: Index[Array, "num_seqs"]
    """Where each seq's last known step left it off (the previous step, or an earlier one
    for a seq that was absent), or -1 when that is not known or the seq restarts."""
    decode_positions: Index[Array, "num_decode"]
    """Batch position of each decode row."""
    draft_token_ids: Index[Array, "num_decode mtp_k"]
    """The drafts each decode seq carries into this step."""
    num_drafts: Index[Array, "num_decode"]
    """Real drafts per row; the rest of the row is placeholder."""
    proposed: Index[Array, "num_decode mtp_k"]
    """The drafts the drafter proposed for the seq in the previous step."""
    has_proposal: Bool[Array, "num_decode"]
    """Whether the previous step proposed drafts for the seq."""
    expected_num_drafts: Index[Array, "num_decode"]
    """Drafts the row must carry: the whole proposal (``mtp_k``) where the previous step
    made one, or -1 where nothing is required (no proposal, a refilled row, an engine that
    trims drafts on purpose)."""
    refilled: Bool[Array, "num_decode"]
    """Rows the runner fills from its previous-step buffers instead of reading them here."""
    num_proposed: Index[Array, "num_decode"] | None = None
    """How many drafts the drafter really proposed for the seq in the previous step, or
    -1 where it proposed none or that is not known."""
    first_seen: Bool[Array, "num_decode"] | None = None
    """Rows whose seq this step is the first the tracker has seen of it, where that is
    certain (None: not known, as for a tracker attached to a running engine)."""
    drafts_handed_over: Bool[Array, "num_decode"] | None = None
    """Rows whose drafts another instance proposed and handed over with the seq."""


@boundary_object(Boundary.VERIFY)
class VerifyRows(BoundaryObject):
    """The verifier's rows against the decode seqs of the step they verify."""

    batch_ids: Index[Array, "num_decode"]
    """The step's decode seqs, in batch order."""
    positions: Index[Array, "num_decode"]
    """Their batch positions."""
    num_drafts: Index[Array, "num_decode"]
    """Real drafts each decode seq carried into verification."""
    seq_ids: Index[Array, "num_rows"]
    """The seq of each verify row."""
    num_accepted: Index[Array, "num_rows"]
    """Accepted drafts per verify row."""


@boundary_object(Boundary.SCHEDULE)
class RecomputedTokens(BoundaryObject):
    """The prefill seqs of a step against the tokens the engine sampled for them.

    Built by the step tracker from the tokens it saw sampled (the verifier's rows and the
    token each prefill sampled after its chunk), by seq id and position, whatever steps
    the seq was absent from in between.
    """

    seq_ids: Index[Array, "num_prefill"]
    """The step's prefill seqs, in batch order."""
    positions: Index[Array, "num_prefill"]
    """Their batch positions."""
    token_positions: Index[Array, "num_prefill"]
    """The first position whose fed token is not the one emitted there, or -1."""
    fed: Index[Array, "num_prefill"]
    """The token fed at that position."""
    emitted: Index[Array, "num_prefill"]
    """The token the engine sampled at that position (a verifier row, or the token a
    prefill sampled after its chunk)."""


@boundary_object(Boundary.DRAFT_OUTPUT)
class DraftRows(BoundaryObject):
    """The drafter's rows against the seqs of the step it drafted for."""

    batch_ids: Index[Array, "num_seqs"]
    """The step's seqs, in batch order."""
    seq_ids: Index[Array, "num_rows"]
    """The seq of each drafter row."""


def _mismatch(expected: Any, actual: Any, what: str, values: ValueChecks,
              locate: Any) -> Finding | None:
    """First row where ``actual`` stops following ``expected``, as a finding."""
    n, m = expected.shape[0], actual.shape[0]
    if n != m:
        row = min(n, m)
        missing = row < n
        return Finding(
            f"{m} {what} rows for {n} seqs", "seq_ids",
            position=locate(row) if missing else None,
            seq_id=host_value(expected, row) if missing else None,
            expected=f"{n} rows in batch order", actual=f"{m} rows")
    return values.any_true(actual != expected, lambda i: Finding(
        f"{what} row {i} belongs to seq {host_value(actual, i)}", "seq_ids",
        position=locate(i), seq_id=host_value(expected, i),
        expected=f"seq {host_value(expected, i)}", actual=f"seq {host_value(actual, i)}"))


@rule("SG601", "a seq resumes where its previous step left off",
      boundary=Boundary.SCHEDULE, applies_to=("StepTransition",),
      fields={"starts", "expected_starts"},
      bug="ATOM C11: decode context_lens minus a stale num_rejected shifts every position "
      "of a deferred seq; vLLM I6: scheduler and runner disagreeing on the rejected count.")
def _resumes(step: StepTransition, values: ValueChecks) -> Finding | None:
    """A seq's first scheduled position is where its last step left it: the previous start
    plus the chunk after a prefill, plus the accepted drafts and one after a decode (the
    correction token is the new anchor). A step whose drafts sit behind more than one
    token (vLLM 0.11.0 and 0.11.1 schedule the drafts of a discarded prefill chunk with
    the final chunk) advances by those tokens plus the accepted drafts. Anything else
    writes KV at the wrong positions or feeds tokens the model already has: silent
    corruption, never a crash.

    What it checks: every seq whose last known step is known, whether that step was the
    previous forward or an earlier one (a seq skipped for a step, or parked, resumes
    where it left off). One exception is legal: a seq that comes back as a *prefill*
    starting before that point is a recompute from its cached prefix after a preemption
    (ATOM's ``preempt`` and vLLM's both restart that way); SG608 checks its tokens
    instead. Applies to every engine whose scheduler waits for the verifier (not to
    vLLM's async scheduling, whose view turns it off)."""
    starts, expected = step.starts, step.expected_starts
    bad = (expected >= 0) & (starts >= 0) & (starts != expected)
    return values.any_true(bad, lambda i: Finding(
        f"starts at position {host_value(starts, i)}, but its previous step (row "
        f"{host_value(step.prev_rows, i)}) left it at {host_value(expected, i)}", "starts",
        position=i, expected=str(host_value(expected, i)), actual=str(host_value(starts, i))))


@rule("SG602", "drafts carried into a step are the ones proposed for the seq",
      boundary=Boundary.SCHEDULE, applies_to=("StepTransition",),
      fields={"draft_token_ids", "proposed", "has_proposal", "num_drafts", "refilled"},
      bug="vLLM #43434: drafts scattered from the current buffer instead of the previous "
      "step's, misassigned after a reorder; ATOM #1444: compacted rows shifting drafts "
      "onto the neighbouring seq.")
def _carried(step: StepTransition, values: ValueChecks) -> Finding | None:
    """The verifier checks drafts against the target's logits whatever their origin: a
    row holding another seq's drafts, or older ones, is verified anyway and, where a
    prefix happens to match, emitted as real output. Shifted rows are the silent form of
    the out-of-bounds lookup."""
    drafts, proposed, k = step.draft_token_ids, step.proposed, step.mtp_k
    carried = step.has_proposal & ~step.refilled
    if not carried.any():
        return None  # no row carries drafts proposed in the previous step
    columns = np.arange(drafts.shape[1])
    compared = (columns[None, :] < step.num_drafts[:, None]) & carried[:, None]
    if step.draft_placeholder is not None:
        compared &= drafts != step.draft_placeholder
    bad = compared & (drafts != proposed)

    def explain(i: int) -> Finding:
        row, column = divmod(i, max(k, 1))
        return Finding(
            f"draft {column} is {int(drafts[row, column])}, but the previous step proposed "
            f"{int(proposed[row, column])} for this seq", "draft_token_ids",
            position=host_value(step.decode_positions, row),
            expected=str(int(proposed[row, column])), actual=str(int(drafts[row, column])))

    return values.any_true(bad, explain)


@rule("SG603", "rows refilled from the previous step were in the previous forward",
      boundary=Boundary.SCHEDULE, applies_to=("StepTransition",),
      fields={"refilled", "draft_token_ids", "draft_placeholder", "prev_rows",
              "decode_positions"},
      bug="vLLM #37629/#40768: a request re-entering the batch with [-1, -1, -1] "
      "placeholders that nothing overwrote reached F.embedding (device-side assert).")
def _refilled(step: StepTransition, values: ValueChecks) -> Finding | None:
    """A runner that keeps drafts on the device (ATOM's deferred rows, vLLM's async
    placeholders) fills the row from its previous-step buffer at the seq's previous row.
    A seq that was not in the previous forward has no such row: its placeholders reach
    the embedding, or another seq's drafts are gathered. For vLLM this holds for async
    scheduling in 0.11.1 (0.11.0 has no async drafts); from 0.33.0 the runner clamps a
    ``-1`` slot it did not fill before the embedding and its sampler rejects it, so the
    vLLM view does not ask this of 0.33 placeholders. A vLLM step that schedules no
    request runs no forward and keeps the runner's buffers: the previous forward is then
    the last step that ran one."""
    needs = cast(np.ndarray, step.refilled).copy()
    drafts = cast(np.ndarray, step.draft_token_ids)
    if step.draft_placeholder is not None:
        needs |= (drafts == step.draft_placeholder).any(axis=1)
    previous = step.prev_rows[step.decode_positions]
    bad = needs & (previous < 0)
    return values.any_true(bad, lambda row: Finding(
        "row is filled from the previous step's drafts, but the seq was not in the "
        "previous forward", "draft_token_ids",
        position=host_value(step.decode_positions, row), expected="a row in the previous forward"))


@rule("SG604", "verify rows follow the step's decode seqs in batch order",
      boundary=Boundary.VERIFY, applies_to=("VerifyRows",), fields={"seq_ids", "batch_ids"},
      bug="ATOM C9: prev_batch.req_ids order must match the sampled rows; vLLM #49355: "
      "sampled rows shaped for one token per request under pipeline parallelism.")
def _verify_rows(rows: VerifyRows, values: ValueChecks) -> Finding | None:
    """Accepted tokens are delivered, and the next anchors picked, by row: a row that
    belongs to another seq hands it someone else's tokens and rolls back the wrong KV."""
    return _mismatch(rows.batch_ids, rows.seq_ids, "verify", values,
                     lambda row: host_value(rows.positions, row))


@rule("SG605", "a row accepts at most the real drafts it carried",
      boundary=Boundary.VERIFY, applies_to=("VerifyRows",),
      fields={"num_accepted", "num_drafts", "seq_ids", "batch_ids"},
      bug="vLLM #46533: a -1 placeholder draft could be accepted by the random-sampling "
      "kernel and emitted as a real token.")
def _accepted_drafts(rows: VerifyRows, values: ValueChecks) -> Finding | None:
    """Placeholder slots are fed to keep shapes uniform, never to be accepted: accepting
    one emits a placeholder as output and advances the context past tokens that were
    never proposed."""
    if rows.num_accepted.shape != rows.num_drafts.shape:
        return None  # SG604 reports the misaligned rows
    bad = rows.num_accepted > rows.num_drafts
    return values.any_true(bad, lambda i: Finding(
        f"accepted {host_value(rows.num_accepted, i)} drafts, but the row carried "
        f"{host_value(rows.num_drafts, i)} real drafts", "num_accepted",
        position=host_value(rows.positions, i), seq_id=host_value(rows.batch_ids, i),
        expected=f"<= {host_value(rows.num_drafts, i)}"))


@rule("SG606", "drafter rows are the step's seqs, in batch order",
      boundary=Boundary.DRAFT_OUTPUT, applies_to=("DraftRows",),
      fields={"seq_ids", "batch_ids"},
      bug="ATOM C17: the next step gathers draft_token_ids[deferred_prev] by previous "
      "batch row; vLLM I9: DraftTokenIds paired with req_ids by position.")
def _draft_rows(rows: DraftRows, values: ValueChecks) -> Finding | None:
    """The next step reads a seq's drafts at its row of this step. A drafter output with
    padded, filtered or reordered rows hands every seq after the first difference its
    neighbour's drafts."""
    return _mismatch(rows.batch_ids, rows.seq_ids, "drafter", values, lambda row: row)


@rule("SG607", "a seq with a proposal carries all of it",
      boundary=Boundary.SCHEDULE, applies_to=("StepTransition",),
      fields={"num_drafts", "expected_num_drafts"},
      bug="Drafts proposed but dropped before verification. A runner that takes a deferred "
      "seq's drafts from the host instead of its previous-step buffer (the family of vLLM "
      "#43434) verifies a seq whose prefill just ended with none: its host row is still "
      "empty, as ATOM's spec_token_ids is on that step. vLLM I5d strips scheduled drafts by "
      "mutating scheduler_output when the runner decides the drafter did not run.")
def _whole_proposal(step: StepTransition, values: ValueChecks) -> Finding | None:
    """Speculation pays off only through the drafts that reach the verifier. A seq whose
    proposal is dropped on the way (a host row still empty because the drafts are on the
    device, drafts stripped from the batch, a row cut short) is verified with fewer drafts
    or none: every token is still the target's own, so neither an output comparison nor
    any single object can see it, and acceptance collapses seq by seq. Engines that trim
    drafts on purpose (vLLM, to the token budget, ``max_model_len`` or a grammar) turn
    this rule off in their tracker."""
    expected, carried = step.expected_num_drafts, step.num_drafts
    bad = (expected >= 0) & (carried < expected)  # carrying more is SG660's
    return values.any_true(bad, lambda row: Finding(
        f"carries {host_value(carried, row)} drafts, but the previous step proposed "
        f"{host_value(expected, row)} for this seq", "num_drafts",
        position=host_value(step.decode_positions, row),
        expected=str(host_value(expected, row)), actual=str(host_value(carried, row))))


@rule("SG608", "a recomputed seq re-feeds only the tokens it was emitted",
      boundary=Boundary.SCHEDULE, applies_to=("RecomputedTokens",),
      fields={"token_positions", "fed", "emitted"},
      bug="ATOM preempt (80b5b02be to ffdf3bb5d): a seq preempted right after a step it "
      "was in keeps the placeholders postprocess appended for that step (it strips "
      "mtp_k + num_rejected, the count before the append), and the recompute feeds them "
      "as real tokens; right after its prefill, an EOS where its first token belongs.")
def _recomputed(tokens: RecomputedTokens, values: ValueChecks) -> Finding | None:
    """A preempted seq is recomputed from its history: its prompt and the tokens the
    engine sampled for it. A placeholder slot (a draft position that was never
    verified, an EOS appended to reserve room) or a token other than the one sampled at
    that position becomes context the model never produced: every later token is
    conditioned on it, silently.

    What it checks: for each prefill seq, every position of its chunk at which the
    tracker saw the engine sample a token (in any earlier step, however long the seq was
    absent) must be fed that token. The sampled tokens are the verifier's rows and the
    token a prefill sampled after a chunk that ends its prompt (the seq's first token,
    given to the tracker with the drafter's input). Prompt positions are not compared
    (nothing was sampled there), and neither are positions whose tokens were not
    reported on the host (device values without ``device_values="sync"``). Tokens
    sampled in the step a seq was preempted in and never delivered are not history
    either: a recompute that stops before them is fine. Engine-independent; needs the
    sampled tokens on the host."""
    bad = tokens.token_positions >= 0
    return values.any_true(bad, lambda i: Finding(
        f"re-feeds token {host_value(tokens.fed, i)} at position "
        f"{host_value(tokens.token_positions, i)}, where the engine sampled "
        f"{host_value(tokens.emitted, i)}", "token_positions",
        position=host_value(tokens.positions, i), seq_id=host_value(tokens.seq_ids, i),
        expected=str(host_value(tokens.emitted, i)), actual=str(host_value(tokens.fed, i))))


@rule("SG660", "a seq carries no more real drafts than were proposed for it",
      boundary=Boundary.SCHEDULE, applies_to=("StepTransition",),
      fields={"num_drafts", "num_proposed", "refilled", "mtp_k"},
      bug="vLLM GPUModelRunner: a step whose longest seq does not fit the drafter "
      "(input_fits_in_drafter=False) runs no drafter, so the drafts async scheduling "
      "already scheduled must be stripped (the scheduler_output deepcopy); vLLM #40589: "
      "a DP rank skipped its drafter for a step while the others drafted.")
def _no_unproposed_drafts(step: StepTransition, values: ValueChecks) -> Finding | None:
    """A drafter that was skipped (its seq past the drafter's context limit, a dummy
    run, a rank that did not draft) or proposed only part of a row hands back
    placeholders: zeros or stale ids that look like any draft. Scheduled as real drafts,
    they are verified, sometimes accepted, and the engine slows down to below
    non-speculative decoding with nothing in any single object to show it.

    What it checks: the real drafts a seq carries, or that the runner fills from its
    previous-step buffer (a refilled row is verified whole), are no more than the
    drafter said it proposed for the seq in the previous step, or, for a seq that sat
    out steps since, in the last step that drafted for it (the tracker remembers short
    proposals where seq ids are stable). Engine-independent; an
    engine whose drafter does not report its counts is taken to propose whole rows."""
    proposed = step.num_proposed
    if proposed is None:
        return None
    carried = np.where(cast(np.ndarray, step.refilled), step.mtp_k, step.num_drafts)
    bad = (proposed >= 0) & (carried > proposed)
    previous = cast(np.ndarray, step.has_proposal)

    def when(row: int) -> str:
        return "the previous step" if bool(host_value(previous, row)) \
            else "the last step that drafted for it"

    return values.any_true(bad, lambda row: Finding(
        f"carries {host_value(carried, row)} real drafts, but {when(row)} proposed "
        f"{host_value(proposed, row)} for this seq", "num_drafts",
        position=host_value(step.decode_positions, row),
        expected=f"<= {host_value(proposed, row)}", actual=str(host_value(carried, row))))


@rule("SG661", "a seq new to the runner carries no drafts it was not handed",
      boundary=Boundary.SCHEDULE, applies_to=("StepTransition",),
      fields={"first_seen", "num_drafts", "refilled", "drafts_handed_over"},
      bug="P/D disaggregation with MTP: a remotely prefilled request's first decode on "
      "the decode instance, or a request resumed there, is scheduled with a draft row "
      "no drafter made for it (zeros, or what the row's previous owner left in the "
      "buffer), verified as real drafts instead of as placeholders.")
def _no_drafts_from_nowhere(step: StepTransition, values: ValueChecks) -> Finding | None:
    """Drafts are proposed by a drafter for a seq it has run: a seq this runner has never
    run (a remotely prefilled request on its first decode, one resumed from elsewhere)
    has none, unless the instance that prefilled it handed its drafter's proposal over
    with it. Whatever else fills its draft slots (zeros, a stale buffer row, another
    seq's drafts) is verified as if proposed: never accepted, or, worse, accepted where
    it happens to match, with nothing in any single object to show it.

    What it checks: a decode row whose seq the tracker has certainly never seen carries
    no real draft (``num_drafts`` 0), unless its drafts are marked as handed over. A row
    the runner refills from its previous-step buffers, placeholder slots included, is
    SG603's: it must have been in the previous forward."""
    first = step.first_seen
    if first is None:
        return None
    real = cast(np.ndarray, step.num_drafts)
    bad = first & (real > 0) & ~cast(np.ndarray, step.refilled)
    handed = step.drafts_handed_over
    if handed is not None:
        bad &= ~handed
    return values.any_true(bad, lambda row: Finding(
        f"first seen at this decode, it carries {host_value(real, row)} real drafts "
        "that no drafter of this engine proposed for it and none handed over",
        "num_drafts", position=host_value(step.decode_positions, row),
        expected="placeholders (0 real drafts), or drafts marked as handed over",
        actual=str(host_value(real, row))))


def runs(*codes: str) -> bool:
    """Whether any of the rules ``codes`` runs at the current depth: the tracker builds an
    object, and keeps what it needs, only for rules that will read it."""
    depth = current_config().depth
    if depth is Depth.FULL:
        return True
    if depth is not Depth.ESSENTIAL:
        return False
    found = _AT_THE_DEFAULT_DEPTH.get(codes)
    if found is None:
        # A rule is declared once, with its depth: the answer for these codes stands.
        found = _AT_THE_DEFAULT_DEPTH[codes] = any(
            REGISTRY[code].depth is Depth.ESSENTIAL for code in codes)
    return found


#: Whether one of a few codes runs at the default depth, by the codes asked about (the
#: tracker asks about the same handful several times a step).
_AT_THE_DEFAULT_DEPTH: dict[tuple[str, ...], bool] = {}


#: The rules of each object the tracker builds, and of what it remembers.
TRANSITION = ("SG601", "SG602", "SG603", "SG607", "SG660", "SG661")
VERIFY = ("SG604", "SG605")
DRAFTER = ("SG606",)
PROGRESS = ("SG601",)
RECOMPUTE = ("SG608",)
