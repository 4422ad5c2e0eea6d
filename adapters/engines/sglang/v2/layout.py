"""SGLang 0.5.23's overlap worker (``EAGLEWorkerV2``) as boundary objects, with rules
SG650-SG658.

MTP in SGLang is EAGLE with ``topk = 1``: one linear chain per request, and
``num_draft_tokens = spec_steps + 1`` verify slots per row (the request's bonus token,
then its drafts). Between steps the overlap scheduler relays each request's bonus token
and first draft through ``FutureMap``, keyed by ``future_indices``; the worker gathers
them at its entry (``resolve_forward_inputs``). Three objects, one per hand-over SGLang
makes inside a step:

* :class:`SglangForwardEntry`: the ``ScheduleBatch`` at
  ``EAGLEWorkerV2.forward_batch_generation``, after ``resolve_forward_inputs`` (before it,
  ``seq_lens`` are stale, ``input_ids`` is None and the draft input's tensors may still
  hold rows of requests that have left: only ``future_indices`` counts there);
* :class:`SglangV2VerifyInput`: the ``EagleVerifyInput`` ``EagleDraftWorker.draft`` builds,
  the target's verify rows and their tree;
* :class:`SglangV2VerifyResult`: ``run_eagle_verify``'s ``GenerationBatchResult``:
  ``accept_index`` padded with ``-1``, ``accept_lens`` counting the bonus token, the
  next step's ``new_seq_lens`` and bonus tokens.

Every field is per request in the batch's row order (finished requests keep their rows
until the next ``filter_batch``); only what SGLang's own consumer of the object reads is
checked (it leaves other fields stale). What SGLang asserts itself is not a rule here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts import (
    Array,
    Boundary,
    BoundaryObject,
    Depth,
    Finding,
    Index,
    ValueChecks,
    boundary_object,
    rule,
)
from specguard.contracts.ops import arange_like, host_value, number_text, row_col, value_text

__all__ = ["SglangForwardEntry", "SglangV2VerifyInput", "SglangV2VerifyResult"]


@boundary_object(Boundary.SCHEDULE, minimums={"vocab_size": 1, "topk": 1})
class SglangForwardEntry(BoundaryObject):
    """The ``ScheduleBatch`` the overlap worker is handed, once its inputs are resolved."""

    vocab_size: int
    """Rows of the target's (and the draft's) embedding table."""
    topk: int
    """``speculative_eagle_topk`` (1 for MTP)."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions (messages name the request ids)."""
    seq_lens: Index[Array, "num_seqs"]
    """Committed tokens per request (``resolve_seq_lens_cpu`` gathered them)."""
    req_pool_indices: Index[Array, "num_seqs"]
    """Each request's row of ``req_to_token``."""
    future_indices: Index[Array, "num_seqs"] | None = None
    """A decode batch's relay keys (``spec_info.future_indices``)."""
    bonus_tokens: Index[Array, "num_seqs"] | None = None
    """A decode batch's bonus tokens, gathered from the relay: each row's first verify
    token."""
    topk_index: Index[Array, "num_seqs topk"] | None = None
    """A decode batch's first drafts, gathered from the relay."""
    input_ids: Index[Array, "num_tokens"] | None = None
    """An extend batch's tokens (``prefill_input_ids_cpu`` moved to the device)."""
    extend_lens: Index[Array, "num_seqs"] | None = None
    """An extend batch's tokens per request (``extend_lens``), which cut ``input_ids``."""

    def _sg_token_position(self, token: int) -> int | None:
        lens = self.extend_lens
        if not isinstance(lens, np.ndarray) or lens.ndim != 1:
            return None
        ends = np.cumsum(lens.astype(np.int64))
        position = int(np.searchsorted(ends, token, side="right"))
        return position if position < ends.shape[0] else None


@boundary_object(Boundary.MODEL_INPUT, minimums={
    "spec_steps": 1, "topk": 1, "draft_token_num": 2})
class SglangV2VerifyInput(BoundaryObject):
    """The ``EagleVerifyInput`` of one step: what the target verifies, row by row."""

    spec_steps: int
    """``speculative_num_steps``: draft tokens per chain."""
    topk: int
    """``speculative_eagle_topk``; the chain rules hold for 1."""
    draft_token_num: int
    """Verify slots per request (``spec_steps + 1`` under ``topk = 1``)."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions."""
    seq_lens: Index[Array, "num_seqs"]
    """Committed tokens per request at the worker's entry."""
    bonus_tokens: Index[Array, "num_seqs"]
    """The bonus tokens the draft input carried (its ``bonus_tokens``)."""
    first_drafts: Index[Array, "num_seqs"]
    """The first drafts the draft input carried (``topk_index[:, 0]``)."""
    draft_token: Index[Array, "num_seqs draft_token_num"]
    """``draft_token`` by request: the bonus token, then the chain."""
    positions: Index[Array, "num_seqs draft_token_num"]
    """``positions`` by request."""
    retrieve_index: Index[Array, "num_seqs draft_token_num"]
    """The flat verify slot of each tree node."""
    retrieve_next_token: Index[Array, "num_seqs draft_token_num"]
    """Each node's first child, ``-1`` at a leaf."""
    retrieve_next_sibling: Index[Array, "num_seqs draft_token_num"]
    """Each node's next sibling, ``-1`` for none."""


@boundary_object(Boundary.VERIFY, minimums={"spec_steps": 1, "draft_token_num": 2})
class SglangV2VerifyResult(BoundaryObject):
    """``run_eagle_verify``'s result: what the scheduler commits and relays."""

    spec_steps: int
    """``speculative_num_steps``."""
    draft_token_num: int
    """Verify slots per request."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions."""
    seq_lens: Index[Array, "num_seqs"]
    """Committed tokens per request before the verify."""
    accept_lens: Index[Array, "num_seqs"]
    """Tokens accepted per request, the bonus token included."""
    accept_index: Index[Array, "num_seqs spec_steps+1"]
    """The verify slots accepted, ``-1`` padded."""
    new_seq_lens: Index[Array, "num_seqs"]
    """What ``on_publish`` relays as the next step's ``seq_lens``."""
    predict: Index[Array, "num_seqs draft_token_num"]
    """``next_token_ids`` by request: the target's token after each verify slot."""
    bonus_tokens: Index[Array, "num_seqs"]
    """``next_draft_input.bonus_tokens``: the next step's first verify token."""


_ENTRY = ("SglangForwardEntry",)
_VERIFY_INPUT = ("SglangV2VerifyInput",)
_RESULT = ("SglangV2VerifyResult",)


@rule("SG650", "each request reads its own relay row",
      boundary=Boundary.SCHEDULE, applies_to=_ENTRY,
      fields={"future_indices", "req_pool_indices"},
      bug="SGLang #8671 (fixed by PR #9252): EagleDraftInput.filter_batch kept the first "
      "len(new_indices) rows instead of the kept requests' rows, so a request dropped "
      "mid-batch handed its neighbours the wrong draft rows; PR #14536 proposed the same "
      "fall-back on a length mismatch.",
      depth=Depth.ESSENTIAL)
def _relay_rows(entry: SglangForwardEntry, values: ValueChecks) -> Finding | None:
    """The overlap scheduler stashes each request's bonus token, first draft and hidden
    state in ``FutureMap`` at its ``req_pool_indices`` row and relays them by
    ``future_indices`` (SGLang's own FIXME: they are the same). ``filter_batch``,
    ``merge_batch`` and ``retract_decode`` must keep the two in step: a key of another row
    gathers another request's bonus token as this one's first verify token, and nothing
    crashes."""
    keys = entry.future_indices
    if keys is None:
        return None
    rows = entry.req_pool_indices
    return values.any_true(keys != rows, lambda i: Finding(
        f"relay key{number_text(keys, i)} for pool row{number_text(rows, i)}",
        "future_indices", position=i, expected=f"key{number_text(rows, i)}, the request's "
        "own pool row"))


@rule("SG651", "every id the overlap worker embeds is in the vocabulary",
      boundary=Boundary.SCHEDULE, applies_to=_ENTRY,
      fields={"input_ids", "bonus_tokens", "topk_index", "vocab_size"},
      bug="SGLang PR #27512: spec-v2 draft prefill fed out-of-vocabulary multimodal pad "
      "sentinels to the draft embed_tokens (an OOB gather at tp=1, masked at tp>1); PR "
      "#27482: id 32000 of a 32000-token vocabulary reached VocabParallelEmbedding.",
      depth=Depth.ESSENTIAL)
def _embedded(entry: SglangForwardEntry, values: ValueChecks) -> Finding | None:
    """What the worker embeds first: an extend batch's ``input_ids`` (the target prefill
    and, shifted by one, the draft prefill), a decode batch's relayed bonus tokens and
    first drafts (the draft's first step). An overlap placeholder (``-future_index``)
    is legal in the scheduler's batch but never here: ``resolve_forward_inputs`` has
    replaced them all. At tp=1 an id outside ``[0, vocab)`` is an out-of-bounds gather;
    under tp>1 masking hides it as a zero embedding."""
    vocab = entry.vocab_size
    ids = entry.input_ids
    if ids is not None:
        found = values.outside(ids, 0, vocab, lambda token: Finding(
            f"input id{value_text(ids, token)}", "input_ids", token=token,
            expected=f"0 <= id < vocab_size={vocab}"))
        if found:
            return found
    bonus = entry.bonus_tokens
    if bonus is not None:
        found = values.outside(bonus, 0, vocab, lambda i: Finding(
            f"bonus token{value_text(bonus, i)}", "bonus_tokens", position=i,
            expected=f"0 <= id < vocab_size={vocab}"))
        if found:
            return found
    drafts = entry.topk_index
    if drafts is None:
        return None
    width = int(entry.topk)
    return values.outside(drafts, 0, vocab, lambda flat: Finding(
        f"first draft{value_text(drafts, flat)}", "topk_index",
        position=row_col(flat, width)[0], expected=f"0 <= id < vocab_size={vocab}"))


@rule("SG652", "each verify row is one linear chain",
      boundary=Boundary.MODEL_INPUT, applies_to=_VERIFY_INPUT,
      fields={"retrieve_index", "retrieve_next_token", "retrieve_next_sibling", "topk"},
      bug="SGLang PR #15360: overlap v2 assumed a dense accepted prefix and produced "
      "gibberish once the tree was not one chain per request.",
      depth=Depth.ESSENTIAL)
def _chain(verify: SglangV2VerifyInput, values: ValueChecks) -> Finding | None:
    """Under ``topk = 1`` the tree kernel builds one chain per request: node ``j`` of row
    ``i`` is verify slot ``i * draft_token_num + j``, its child is node ``j + 1`` and it
    has no sibling. The greedy verify walks ``retrieve_next_token``, and
    ``fill_bonus_tokens_func`` reads the bonus token at ``accept_len - 1``, which is
    right only for that chain."""
    if int(verify.topk) != 1:
        return None
    index, nxt, sibling = (verify.retrieve_index, verify.retrieve_next_token,
                           verify.retrieve_next_sibling)
    width = int(verify.draft_token_num)
    rows = index.shape[0]
    slots = arange_like(index, rows * width).reshape(rows, width)
    columns = arange_like(index, width)
    children = ((columns + 2) * (columns < width - 1) - 1)[None, :] + 0 * nxt

    def explain(field: str, actual: Any, expected: Any) -> Any:
        def finding(flat: int) -> Finding:
            row, col = row_col(flat, width)
            return Finding(f"node {col} has {field}{number_text(actual, flat)}", field,
                           position=row, expected=f"{field} {host_value(expected, flat)}")
        return finding

    return (values.any_true(index != slots, explain("retrieve_index", index, slots))
            or values.any_true(nxt != children, explain("retrieve_next_token", nxt, children))
            or values.any_true(sibling != -1, explain("retrieve_next_sibling", sibling,
                                                       sibling * 0 - 1)))


@rule("SG653", "verify positions continue each request's sequence",
      boundary=Boundary.MODEL_INPUT, applies_to=_VERIFY_INPUT,
      fields={"positions", "seq_lens"},
      bug="SGLang 0.5.23 overlap scheduling: at run_batch's entry seq_lens are stale "
      "until resolve_seq_lens_cpu gathers them from FutureMap; verify positions built from "
      "the stale lengths write KV over committed tokens, and nothing crashes until a "
      "gather runs off a row (the out-of-bounds gather of #15638 in the v2 draft extend).",
      depth=Depth.ESSENTIAL)
def _positions(verify: SglangV2VerifyInput, values: ValueChecks) -> Finding | None:
    """Slot ``j`` of a request's verify row sits at position ``seq_len + j``: the bonus
    token right after the committed tokens, then the chain. Positions built from stale
    ``seq_lens`` write KV over committed tokens or leave holes."""
    positions, lens = verify.positions, verify.seq_lens
    width = int(verify.draft_token_num)
    expected = lens[:, None] + arange_like(positions, width)[None, :]

    def explain(flat: int) -> Finding:
        row, col = row_col(flat, width)
        return Finding(f"slot {col} at position{number_text(positions, flat)}", "positions",
                       position=row, expected=f"seq_len + {col} = {host_value(expected, flat)}")

    return values.any_true(positions != expected, explain)


@rule("SG654", "a verify row starts with the request's carried bonus token and draft",
      boundary=Boundary.MODEL_INPUT, applies_to=_VERIFY_INPUT,
      fields={"draft_token", "bonus_tokens", "first_drafts"},
      bug="SGLang #8671 family: draft rows misaligned with batch order verify one "
      "request's chain from another request's bonus token.",
      depth=Depth.ESSENTIAL)
def _row_start(verify: SglangV2VerifyInput, values: ValueChecks) -> Finding | None:
    """``build_tree_kernel_efficient`` puts the draft input's ``bonus_tokens`` first in
    every row, and the chain's first draft is its ``topk_index``: a row that starts with
    anything else verifies drafts against the wrong context, silently."""
    tokens = verify.draft_token
    bonus, first = verify.bonus_tokens, verify.first_drafts
    width = int(verify.draft_token_num)
    found = values.any_true(tokens[:, 0] != bonus, lambda i: Finding(
        f"row starts with{number_text(tokens, i * width)}", "draft_token", position=i,
        expected=f"the bonus token{number_text(bonus, i)}"))
    return found or values.any_true(tokens[:, 1] != first, lambda i: Finding(
        f"first draft is{number_text(tokens, i * width + 1)}", "draft_token", position=i,
        expected=f"the carried draft{number_text(first, i)}"))


@rule("SG655", "accept_lens count the bonus token: 1 to spec_steps + 1",
      boundary=Boundary.VERIFY, applies_to=_RESULT, fields={"accept_lens", "spec_steps"},
      bug="SGLang 0.5.x: v2 accept_lens include the bonus token (v1's accept_length did "
      "not); the scheduler converts back with x - 1, so a count in the other convention "
      "commits one token too many or too few per request.",
      depth=Depth.ESSENTIAL)
def _accept_lens(result: SglangV2VerifyResult, values: ValueChecks) -> Finding | None:
    """``eagle_sample`` ends with ``accept_length += 1``: every request commits its
    accepted drafts and one bonus token, so ``1 <= accept_lens <= spec_steps + 1``."""
    lens, top = result.accept_lens, int(result.spec_steps) + 1
    return values.outside(lens, 1, top + 1, lambda i: Finding(
        f"accept_len{value_text(lens, i)}", "accept_lens", position=i,
        expected=f"1 <= accept_len <= spec_steps + 1 = {top}"))


@rule("SG656", "accept_index is a -1 padded prefix of the request's own verify slots",
      boundary=Boundary.VERIFY, applies_to=_RESULT,
      fields={"accept_index", "accept_lens", "draft_token_num"},
      bug="SGLang PR #26866 (reverted by #26981): accept_index over-read with size "
      "bs * num_draft_tokens, an illegal memory access with topk > 1.",
      depth=Depth.ESSENTIAL)
def _accept_index(result: SglangV2VerifyResult, values: ValueChecks) -> Finding | None:
    """The scheduler takes ``predict[accept_index]`` as each request's committed tokens:
    on a chain, row ``i`` accepts slots ``i * draft_token_num + j`` for ``j <
    accept_len`` and is ``-1`` after. A slot of another row commits another request's
    tokens."""
    index, lens = result.accept_index, result.accept_lens
    width = index.shape[1] if len(index.shape) == 2 else 0
    rows = index.shape[0]
    columns = arange_like(index, width)[None, :]
    starts = arange_like(index, rows)[:, None] * int(result.draft_token_num)
    taken = columns < lens[:, None]
    expected = (starts + columns + 1) * taken - 1

    def explain(flat: int) -> Finding:
        row, col = row_col(flat, width)
        return Finding(f"column {col} is{number_text(index, flat)}", "accept_index",
                       position=row, expected=str(host_value(expected, flat)))

    return values.any_true(index != expected, explain)


@rule("SG657", "new_seq_lens advance each request by its accept_len",
      boundary=Boundary.VERIFY, applies_to=_RESULT,
      fields={"new_seq_lens", "seq_lens", "accept_lens"},
      bug="SGLang 0.5.23: the overlap scheduler never recomputes a request's length; the "
      "next step's seq_lens are what on_publish relayed, so a wrong count shifts every "
      "later position of the request.",
      depth=Depth.ESSENTIAL)
def _new_seq_lens(result: SglangV2VerifyResult, values: ValueChecks) -> Finding | None:
    """``run_eagle_verify``: ``new_seq_lens = seq_lens + accept_lens`` (the bonus token
    is committed, not yet in the KV cache: it is the next row's first slot)."""
    new, lens, accepted = result.new_seq_lens, result.seq_lens, result.accept_lens
    return values.any_true(new != lens + accepted, lambda i: Finding(
        f"new_seq_len{number_text(new, i)} after{number_text(lens, i)} +"
        f"{number_text(accepted, i)} accepted", "new_seq_lens", position=i,
        expected="seq_len + accept_len"))


@rule("SG658", "the bonus token is the last accepted token of the request's own row",
      boundary=Boundary.VERIFY, applies_to=_RESULT,
      fields={"bonus_tokens", "predict", "accept_lens"},
      bug="SGLang PR #15360 and PR #26866: fill_new_verified_id / the bonus-token stride "
      "was num_draft_tokens instead of spec_steps + 1, wrong for bs > 1 once they differ: "
      "every request after the first continued from another row's token.",
      depth=Depth.ESSENTIAL)
def _bonus(result: SglangV2VerifyResult, values: ValueChecks) -> Finding | None:
    """``fill_bonus_tokens_func`` reads ``predict[accept_index[i, accept_len - 1]]``: the
    target's token after the request's last accepted slot. It is the next step's first
    verify token and the last token committed for the request."""
    predict, lens, bonus = result.predict, result.accept_lens, result.bonus_tokens
    width = int(result.draft_token_num)
    rows = predict.shape[0]
    last = (lens - 1).clip(0, width - 1)
    flat = arange_like(predict, rows) * width + last
    expected = predict.reshape(-1)[flat]
    return values.any_true(bonus != expected, lambda i: Finding(
        f"bonus token{number_text(bonus, i)}", "bonus_tokens", position=i,
        expected=f"predict[{host_value(flat, i)}] ={number_text(expected, i)}"))
