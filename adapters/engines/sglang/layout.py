"""SGLang's own EAGLE/MTP layout (release 0.5.10, the v1 ``EAGLEWorker``), as boundary
objects with rules SG640-SG647.

SGLang runs MTP as EAGLE with ``topk = 1``: every request drafts one linear chain of
``spec_steps`` tokens, and ``speculative_num_draft_tokens`` is forced to
``spec_steps + 1`` (``server_args.py``). Its worker hands the same requests through four
objects in one decode step, none of which carries a request id: rows are matched by
``batch.reqs`` order alone. SGLang checks the row *count* of one of them
(``SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK``, ``len(new_indices) == len(topk_p)``) and none
of the rest: not which row belongs to which request, not the chain's shape, not that a
row continues its request from the step before. Those are these rules:

* :class:`SglangDraftInput`: the ``EagleDraftInput`` a decode batch carries into
  ``forward_batch_generation`` (one row per request, SG640; each row the request's own,
  SG647);
* :class:`SglangVerifyInput`: the ``EagleVerifyInput`` that ``draft()`` returns, what the
  target verifies (``bs * (steps + 1)`` rows in ``reqs`` order, SG641; one linear chain
  at consecutive positions, SG642; each row anchored at its request's verified id and
  the draft model's first proposal, SG643);
* :class:`SglangVerifyResult`: the ``EagleVerifyOutput`` of ``verify()`` (one accept
  length per request and ``sum(accepted + 1)`` verified ids, SG644; the next draft input
  keeps exactly the unfinished requests, in order, SG645);
* :class:`SglangDraftExtend`: the draft model's extend after a verify (each request
  re-fed its accepted tokens plus the bonus at the positions after its prefix, SG646).

Every rule reads only what SGLang's consumer of that object reads: at target verify
``extend_seq_lens`` still hold the last prefill's lengths and ``batch.input_ids`` the
previous step's ids (the spec path returns early from ``prepare_for_decode``), and
nothing here looks at them.
"""

from __future__ import annotations

from typing import Any

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
    rule,
)
from specguard.contracts.ops import arange_like, host_value, number_text, row_col

__all__ = ["DRAFT_INPUT_PARTS", "SglangDraftExtend", "SglangDraftInput", "SglangVerifyInput",
           "SglangVerifyResult"]

#: The ``EagleDraftInput`` tensors whose rows follow ``batch.reqs`` at a decode step,
#: then the batch's own per-request tensors: ``SglangDraftInput.<part>_rows`` each.
DRAFT_INPUT_PARTS = ("verified_id", "topk_p", "topk_index", "hidden_states", "seq_lens",
                     "req_pool_indices")


@boundary_object(Boundary.SCHEDULE, minimums={"topk": 1})
class SglangDraftInput(BoundaryObject):
    """A decode ``ScheduleBatch`` as ``EAGLEWorker.forward_batch_generation`` receives it:
    its requests and the ``EagleDraftInput`` rows that draft for them. The row counts
    are read from shapes; the arrays share ``verified_id``'s device."""

    topk: int
    """``speculative_eagle_topk`` (1 for MTP)."""
    topk_width: int
    """``spec_info.topk_index.shape[1]`` (-1 when it is not a matrix)."""
    verified_id_rows: int
    """Rows of ``spec_info.verified_id``."""
    topk_p_rows: int
    """Rows of ``spec_info.topk_p``."""
    topk_index_rows: int
    """Rows of ``spec_info.topk_index``."""
    hidden_states_rows: int
    """Rows of ``spec_info.hidden_states``."""
    seq_lens_rows: int
    """Rows of ``batch.seq_lens``."""
    req_pool_indices_rows: int
    """Rows of ``batch.req_pool_indices``."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions of ``batch.reqs`` (messages name each request's ``rid``)."""
    verified_id: Index[Array, "num_rows"]
    """``spec_info.verified_id``: per row, the token the draft chain starts from."""
    expected_ids: Index[Array, "num_seqs"]
    """Per request, the token it was last given (the one its prefill sampled, or the last
    one its previous verify accepted), or -1 where that is not known."""


@boundary_object(Boundary.DRAFT_OUTPUT, minimums={
    "spec_steps": 1, "topk": 1, "draft_token_num": 1})
class SglangVerifyInput(BoundaryObject):
    """The ``EagleVerifyInput`` that ``EAGLEWorker.draft`` returns, with the rows of the
    batch it drafted for."""

    spec_steps: int
    """``speculative_num_steps``: drafts per request."""
    topk: int
    """``topk`` of the verify input."""
    draft_token_num: int
    """``draft_token_num``: tokens per request to verify (``spec_steps + 1`` at topk 1)."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions of ``batch.reqs``."""
    seq_lens: Index[Array, "num_seqs"]
    """``batch.seq_lens`` before the verify: where each request's chain starts."""
    anchors: Index[Array, "num_anchors"]
    """``batch.spec_info.verified_id``: the token each chain starts from."""
    first_drafts: Index[Array, "num_firsts"]
    """``batch.spec_info.topk_index[:, 0]``: the draft model's first proposal per row."""
    draft_token: Index[Array, "num_tokens"]
    """``draft_token``: flat, ``draft_token_num`` per request."""
    positions: Index[Array, "num_positions"]
    """``positions`` of the verify forward."""
    retrive_index: Index[Array, "num_rows num_cols"]
    """``retrive_index``: the flat index of each tree node."""
    retrive_next_token: Index[Array, "num_rows num_cols"]
    """``retrive_next_token``: each node's first child, -1 at a leaf."""
    retrive_next_sibling: Index[Array, "num_rows num_cols"]
    """``retrive_next_sibling``: each node's next sibling, -1 for none."""


@boundary_object(Boundary.VERIFY, minimums={"spec_steps": 1, "num_verified": 0,
                                             "num_next_verified": 0, "num_next_hidden": 0})
class SglangVerifyResult(BoundaryObject):
    """The ``EagleVerifyOutput`` of ``EAGLEWorker.verify`` against the batch it verified."""

    spec_steps: int
    """``speculative_num_steps``: a request accepts at most this many drafts."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions of ``batch.reqs`` (finished requests included: the scheduler
    filters them afterwards)."""
    finished: Bool[Array, "num_seqs"]
    """``req.finished()`` of each request after the verify."""
    accept_length: Index[Array, "num_accept"]
    """``accept_length_per_req_cpu``: accepted drafts per request, the bonus not counted."""
    num_verified: int
    """``verified_id.numel()``: accepted drafts plus one bonus token per request."""
    next_accept_length: Index[Array, "num_next"]
    """``draft_input.accept_length_cpu``: the rows the next draft input keeps."""
    num_next_verified: int
    """``draft_input.verified_id.numel()``."""
    num_next_hidden: int
    """``draft_input.hidden_states.shape[0]``."""


@boundary_object(Boundary.DRAFT_INPUT, minimums={"num_tokens": 0, "num_accepted_tokens": 0})
class SglangDraftExtend(BoundaryObject):
    """What ``forward_draft_extend_after_decode`` fed the draft model: the accepted
    tokens of the unfinished requests, and the draft input it left for the next step.
    What the verify said (accept lengths, lengths after it) is on the host; the view
    turns it into the expected positions and span ends on the tensors' device."""

    num_tokens: int
    """``batch.input_ids.numel()``: the flat accepted tokens."""
    num_accepted_tokens: int
    """``sum(accepted + 1)`` over the unfinished requests, from the verify."""
    seq_ids: Index[Array, "num_seqs"]
    """The unfinished requests, in batch order (messages name their ``rid``)."""
    input_ids: Index[Array, "num_tokens"]
    """``batch.input_ids``: the tokens fed."""
    positions: Index[Array, "num_positions"]
    """``spec_info.positions``."""
    expected_positions: Index[Array, "num_expected"]
    """``seq_len - (accepted + 1) + j`` for the ``j``-th token of each request's span."""
    span_ends: Index[Array, "num_seqs"]
    """The flat index of each request's last token (its bonus)."""
    verified_id: Index[Array, "num_rows"]
    """``spec_info.verified_id``: the token each request's next chain starts from."""


_DRAFT_INPUT = ("SglangDraftInput",)
_VERIFY_INPUT = ("SglangVerifyInput",)
_VERIFY_RESULT = ("SglangVerifyResult",)


@rule("SG640", "the draft input has one row per request of the batch",
      boundary=Boundary.SCHEDULE, applies_to=_DRAFT_INPUT,
      fields={f"{part}_rows" for part in DRAFT_INPUT_PARTS} | {"topk_width"},
      bug="SGLang #2896 (fixed by #2939): retracted requests and requests with "
      "max_new_tokens=1 were left in EagleDraftInput, so its rows outnumbered batch.reqs; "
      "#14368 saw the same mismatch after a prefill.", depth=Depth.ESSENTIAL)
def _one_row_per_request(batch: SglangDraftInput, values: ValueChecks) -> Finding | None:
    """``draft()`` allocates ``bs * topk * steps`` slots from ``len(reqs)`` and reads
    ``topk_index``, ``topk_p`` and ``hidden_states`` by row; ``filter_batch`` and
    ``merge_batch`` keep them in step with ``reqs`` only by count. A draft input with
    another row count drafts for requests that are gone, or none for the last ones. Only
    shapes are read."""
    size = batch.seq_ids.shape[0]
    for part in DRAFT_INPUT_PARTS:
        rows = getattr(batch, f"{part}_rows")
        if rows != size:
            owner = "batch" if part in ("seq_lens", "req_pool_indices") else "spec_info"
            return Finding(
                f"{owner}.{part} has {rows} rows for {size} requests", f"{part}_rows",
                position=rows if 0 <= rows < size else None,
                expected=f"{size} rows, one per request in batch.reqs",
                actual=f"{rows} rows")
    if batch.topk_width != batch.topk:
        return Finding(f"spec_info.topk_index is {batch.topk_width} wide", "topk_index",
                       expected=f"topk={batch.topk} columns")
    return None


@rule("SG647", "each request's draft row continues it: its verified id is its last token",
      boundary=Boundary.SCHEDULE, applies_to=_DRAFT_INPUT,
      fields={"verified_id", "expected_ids"},
      bug="SGLang #8671 (fixed by #9252): EagleDraftInput.filter_batch(has_been_filtered="
      "True) keeps the first len(new_indices) rows; a request dropped right after extend "
      "left the wrong request's draft rows in place, misaligned with batch.reqs.",
      depth=Depth.ESSENTIAL)
def _continues(batch: SglangDraftInput, values: ValueChecks) -> Finding | None:
    """Step to step, by request id: the verified id row ``i`` carries into a decode step
    must be the token request ``reqs[i]`` was last given (what its prefill sampled, or
    the bonus token its previous verify accepted). ``draft()`` puts that token first in
    the request's verify row and the draft model extends from it, so a row that belongs
    to another request drafts and verifies that request's continuation. Rows of another
    count are SG640's."""
    ids, expected = batch.verified_id, batch.expected_ids
    if ids.shape[0] != expected.shape[0]:
        return None
    return values.any_true((expected >= 0) & (ids != expected), lambda i: Finding(
        f"draft row {i} starts from token{number_text(ids, i)}", "verified_id", position=i,
        expected=f"token {host_value(expected, i)}, the last one the request was given",
        actual=str(host_value(ids, i))))


@rule("SG641", "verify rows are bs*(steps+1): one chain per request, in reqs order",
      boundary=Boundary.DRAFT_OUTPUT, applies_to=_VERIFY_INPUT,
      fields={"draft_token", "positions", "retrive_index", "draft_token_num"},
      bug="SGLang PR #26866 (reverted by #26981) read accept_index with size "
      "bs*num_draft_tokens where the rows are bs*(steps+1) wide, an illegal memory access "
      "at topk>1; verify() reshapes draft_token to (bs, draft_token_num) and walks "
      "retrive_index by row.", depth=Depth.ESSENTIAL)
def _verify_rows(spec: SglangVerifyInput, values: ValueChecks) -> Finding | None:
    """``verify()`` takes ``candidates = draft_token.reshape(bs, draft_token_num)`` and
    the target's logits rows in the same layout; ``bs`` is ``retrive_index.shape[0]``.
    With topk 1 (MTP) ``draft_token_num`` is forced to ``spec_steps + 1``, and row ``i``
    of the tree is ``i * draft_token_num ..``: the request at batch position ``i``."""
    bs, width = spec.seq_ids.shape[0], int(spec.draft_token_num)
    if spec.topk == 1 and width != spec.spec_steps + 1:
        return Finding(f"draft_token_num={width} with topk 1", "draft_token_num",
                       expected=f"spec_steps + 1 = {spec.spec_steps + 1}")
    for name, array in (("draft_token", spec.draft_token), ("positions", spec.positions)):
        if array.shape[0] != bs * width:
            return Finding(f"{name} has {array.shape[0]} entries for {bs} requests",
                           name, expected=f"bs * draft_token_num = {bs * width}",
                           actual=str(array.shape[0]))
    index = spec.retrive_index
    if tuple(index.shape) != (bs, width):
        return Finding(f"the tree is {tuple(index.shape)}", "retrive_index",
                       expected=f"({bs}, {width}): one row per request")
    flat = arange_like(index, bs * width).reshape(bs, width)
    return values.any_true(index != flat, lambda at: Finding(
        f"tree row {row_col(at, width)[0]} node {row_col(at, width)[1]} reads draft "
        f"token{number_text(index.reshape(-1), at)}", "retrive_index",
        position=row_col(at, width)[0], expected=f"token {at}, its own row's"))


@rule("SG642", "each request drafts one linear chain at consecutive positions (topk=1)",
      boundary=Boundary.DRAFT_OUTPUT, applies_to=_VERIFY_INPUT,
      fields={"retrive_next_token", "retrive_next_sibling", "positions", "seq_lens"},
      bug="SGLang PR #15360: the overlap worker assumed a dense accepted prefix (one "
      "chain) where the tree was not one, and produced gibberish; "
      "fill_new_verified_id reads ndt*i + accept_len - 1, valid only for a chain.",
      depth=Depth.ESSENTIAL)
def _linear_chain(spec: SglangVerifyInput, values: ValueChecks) -> Finding | None:
    """At topk 1 the tree kernel builds, per request, the chain ``0 -> 1 -> .. -> steps``:
    ``retrive_next_token = [1, 2, .., ndt-1, -1]``, no siblings, and positions
    ``seq_len + depth``. The greedy and sampling verifiers walk exactly these links, and
    SGLang's v2 code reads the accepted tokens as a dense prefix of the row."""
    if spec.topk != 1:
        return None
    bs, width = spec.seq_ids.shape[0], int(spec.draft_token_num)
    nxt, sibling = spec.retrive_next_token, spec.retrive_next_sibling
    if tuple(nxt.shape) != (bs, width) or spec.positions.shape[0] != bs * width:
        return None  # SG641's
    depth = arange_like(nxt, width)
    chain = (depth + 1)[None, :].expand(bs, width) if hasattr(depth, "expand") \
        else (depth + 1)[None, :].repeat(bs, 0)
    chain = chain.clone() if hasattr(chain, "clone") else chain.copy()
    chain[:, width - 1] = -1
    found = values.any_true(nxt != chain, lambda at: Finding(
        f"node {row_col(at, width)[1]} links to{number_text(nxt.reshape(-1), at)}",
        "retrive_next_token", position=row_col(at, width)[0],
        expected="the next node of the chain (-1 after the last)"))
    found = found or values.any_true(sibling != -1, lambda at: Finding(
        f"node {row_col(at, width)[1]} has sibling{number_text(sibling.reshape(-1), at)}",
        "retrive_next_sibling", position=row_col(at, width)[0],
        expected="-1: a chain has no siblings"))
    if found:
        return found
    positions = spec.positions.reshape(bs, width)
    steps = arange_like(positions, width)
    wanted = spec.seq_lens.reshape(bs, 1) + steps[None, :]
    return values.any_true(positions != wanted, lambda at: Finding(
        f"chain node {row_col(at, width)[1]} at position"
        f"{number_text(positions.reshape(-1), at)}", "positions",
        position=row_col(at, width)[0],
        expected=f"seq_len + {row_col(at, width)[1]} = "
        f"{_int(spec.seq_lens, row_col(at, width)[0]) + row_col(at, width)[1]}"))


@rule("SG643", "each verify row starts from its request's verified id and first draft",
      boundary=Boundary.DRAFT_OUTPUT, applies_to=_VERIFY_INPUT,
      fields={"draft_token", "anchors", "first_drafts"},
      bug="SGLang #8671: draft rows misaligned with batch order verify one request's "
      "drafts after another request's last token; build_tree_kernel_efficient writes "
      "verified_id[i] first in row i.", depth=Depth.ESSENTIAL)
def _anchored(spec: SglangVerifyInput, values: ValueChecks) -> Finding | None:
    """``build_tree_kernel_efficient`` writes ``verified_id[i]`` at the head of row ``i``
    and the draft model's chain after it, the first link being the ``topk_index`` that
    the last draft extend captured for the row. The target verifies ``row[j + 1]``
    against its prediction after ``row[j]``, so a head that is not the request's own
    token verifies the drafts of another context."""
    bs, width = spec.seq_ids.shape[0], int(spec.draft_token_num)
    if spec.draft_token.shape[0] != bs * width or spec.anchors.shape[0] != bs:
        return None  # SG641's and SG640's
    rows = spec.draft_token.reshape(bs, width)
    heads = rows[:, 0]
    found = values.any_true(heads != spec.anchors, lambda i: Finding(
        f"verify row {i} starts with token{number_text(heads, i)}", "draft_token",
        position=i, expected=f"verified_id {host_value(spec.anchors, i)}"))
    if found or width < 2 or spec.first_drafts.shape[0] != bs:
        return found
    firsts = rows[:, 1]
    return values.any_true(firsts != spec.first_drafts, lambda i: Finding(
        f"verify row {i} drafts token{number_text(firsts, i)} first", "draft_token",
        position=i, expected=f"topk_index {host_value(spec.first_drafts, i)}, the draft "
        "extend's proposal for the request"))


@rule("SG644", "one accept length per request, within [0, steps], and sum(accepted+1) ids",
      boundary=Boundary.VERIFY, applies_to=_VERIFY_RESULT,
      fields={"accept_length", "num_verified", "spec_steps"},
      bug="SGLang v1 counts accepted drafts without the bonus (v2's accept_lens include "
      "it, and the scheduler subtracts 1); verify_tree_greedy_func on an unsupported "
      "device left accept_length as torch.empty garbage, an IndexError in "
      "update_spec_acceptance_histogram.", depth=Depth.ESSENTIAL)
def _accepted(out: SglangVerifyResult, values: ValueChecks) -> Finding | None:
    """The scheduler zips ``accept_length_per_req_cpu`` with ``batch.reqs``
    (``process_batch_result_decode``) and cuts ``verified_id`` into one span of
    ``accepted + 1`` tokens per request; ``seq_lens`` advance by the same. Every count is
    on the host: this costs no sync."""
    bs, accept = out.seq_ids.shape[0], out.accept_length
    if accept.shape[0] != bs:
        return Finding(f"{accept.shape[0]} accept lengths for {bs} requests",
                       "accept_length", expected=f"{bs}, one per request in batch.reqs")
    found = values.outside(accept, 0, int(out.spec_steps) + 1, lambda i: Finding(
        f"accepted{number_text(accept, i)} drafts", "accept_length", position=i,
        expected=f"0..spec_steps={out.spec_steps} (the bonus token is not counted)"))
    if found:
        return found
    total = int((accept + 1).sum()) if bs else 0
    if total != out.num_verified:
        return Finding(f"{out.num_verified} verified ids", "num_verified",
                       expected=f"sum(accept_length + 1) = {total}")
    return None


@rule("SG645", "the next draft input keeps the unfinished requests, in order",
      boundary=Boundary.VERIFY, applies_to=_VERIFY_RESULT,
      fields={"next_accept_length", "num_next_verified", "num_next_hidden", "finished"},
      bug="SGLang #2896 and #8671: verify() drops the finished rows from the draft "
      "input, and the scheduler's filter_batch(v1_spec_info_filtered=True) then trusts "
      "that the rows left are the unfinished requests in batch order.",
      depth=Depth.ESSENTIAL)
def _next_rows(out: SglangVerifyResult, values: ValueChecks) -> Finding | None:
    """``verify()`` builds the next ``EagleDraftInput`` from the unfinished requests
    only, in batch order: their accept lengths, and ``accepted + 1`` verified ids and
    hidden states each. Draft extend and the scheduler's filter read it that way."""
    bs = out.seq_ids.shape[0]
    if out.accept_length.shape[0] != bs or out.finished.shape[0] != bs:
        return None  # SG644's
    kept = out.accept_length[~out.finished]
    nxt = out.next_accept_length
    if nxt.shape[0] != kept.shape[0]:
        return Finding(f"the next draft input has {nxt.shape[0]} rows", "next_accept_length",
                       expected=f"{kept.shape[0]}, one per unfinished request")
    found = values.any_true(nxt != kept, lambda row: Finding(
        f"the next draft input's row {row} accepted{number_text(nxt, row)} drafts",
        "next_accept_length", expected=f"{host_value(kept, row)}, the accept length of "
        f"unfinished request {row} in batch order"))
    if found:
        return found
    total = int((kept + 1).sum()) if kept.shape[0] else 0
    for name, count in (("num_next_verified", out.num_next_verified),
                        ("num_next_hidden", out.num_next_hidden)):
        if total and count != total:
            return Finding(f"the next draft input has {count} rows", name,
                           expected=f"sum(accepted + 1) of the unfinished = {total}")
    return None


@rule("SG646", "draft extend feeds each request its accepted tokens after its prefix",
      boundary=Boundary.DRAFT_INPUT, applies_to=("SglangDraftExtend",),
      fields={"input_ids", "num_accepted_tokens", "positions", "expected_positions",
              "span_ends", "verified_id"},
      bug="SGLang #15638: an index-out-of-bounds gather in the EAGLE draft extend; "
      "prepare_extend_after_decode sets extend_lens = accept_length + 1 and a Triton "
      "kernel derives positions and the next verified id from them.",
      depth=Depth.ESSENTIAL)
def _draft_extend(ext: SglangDraftExtend, values: ValueChecks) -> Finding | None:
    """Request ``i`` is re-fed its ``accept_length[i] + 1`` tokens at positions
    ``seq_len - (accepted + 1) ..``, and its next chain starts from the last of them
    (``create_extend_after_decode_spec_info``). Rows are the unfinished requests only."""
    total, size = int(ext.num_accepted_tokens), ext.seq_ids.shape[0]
    if int(ext.num_tokens) != total:
        return Finding(f"draft extend fed {ext.num_tokens} tokens", "input_ids",
                       expected=f"sum(accepted + 1) = {total} over {size} unfinished "
                       "requests")
    if ext.positions.shape[0] != total or ext.verified_id.shape[0] != size \
            or ext.expected_positions.shape[0] != total:
        return Finding(f"{ext.positions.shape[0]} positions and "
                       f"{ext.verified_id.shape[0]} verified ids", "positions",
                       expected=f"{total} positions, {size} ids")
    if not total:
        return None
    ends = ext.span_ends
    found = values.any_true(ext.positions != ext.expected_positions, lambda t: Finding(
        f"token {t} of the draft extend at position{number_text(ext.positions, t)}",
        "positions", position=_owner(ends, t),
        expected=f"position{number_text(ext.expected_positions, t)}"))
    if found:
        return found
    last = ext.input_ids[ends]
    return values.any_true(ext.verified_id != last, lambda i: Finding(
        f"the next chain starts from token{number_text(ext.verified_id, i)}", "verified_id",
        position=i, expected=f"token {host_value(last, i)}, the last one accepted"))


def _owner(ends: Any, token: int) -> int | None:
    """The request whose span holds flat ``token`` (None off the host)."""
    for row in range(ends.shape[0]):
        end = host_value(ends, row)
        if end is None:
            return None
        if token <= end:
            return row
    return None


def _int(array: Any, index: int) -> int:
    value = host_value(array, index)
    return int(value) if value is not None else 0
