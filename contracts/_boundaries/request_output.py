"""``RequestOutput``: the tokens each request is finally given at the end of a step.

The verifier's rows (:class:`VerifyOutput`) rightly hold every token the target model
confirmed, an end-of-sequence token and whatever the drafts said after it included. What
a request is *given* is less: its tokens up to and including the first stop token it
accepts, and never more than its ``max_new_tokens`` in total. That trim is the engine's
output processing, and it is where speculative decoding breaks it: one step hands over
up to ``mtp_k + 1`` tokens at once, so a stop can land mid-row and the limit can be
overshot by several tokens, which a one-token-per-step engine never had to handle.
"""

from __future__ import annotations

from typing import Any

from specguard.contracts._boundaries._backend_neutral import (
    arange_like,
    host_value,
    number_text,
    row_col,
    value_text,
)
from specguard.contracts._boundaries._types import Array, Bool, Index
from specguard.contracts._core._arrays import array_kind
from specguard.contracts._core._config import Depth
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary, rule
from specguard.contracts._core._values import ValueChecks, scalar_mask
from specguard.contracts._core._violation import Finding

__all__ = ["RequestOutput"]

#: The padding after a row's emitted tokens, and after a request's stop ids.
_NONE = -1


@boundary_object(Boundary.OUTPUT, minimums={"vocab_size": 1})
class RequestOutput(BoundaryObject):
    """The tokens each request is given this step, ``(num_seqs, width)`` left-packed rows.

    Row ``i`` holds the ``num_emitted[i]`` tokens request ``seq_ids[i]`` is given, then
    ``-1``. With what it was given before (``num_generated``), its limit and its stop ids,
    the object says whether the trim was right: nothing after an accepted stop token,
    nothing past ``max_new_tokens``, and a request that got there marked finished.
    """

    vocab_size: int
    """Vocabulary size: every token given, and every stop id, is in ``[0, vocab_size)``."""
    seq_ids: Index[Array, "num_seqs"]
    """The requests given tokens this step, in the order they are delivered."""
    token_ids: Index[Array, "num_seqs width"]
    """The tokens each request is given this step, then ``-1``."""
    num_emitted: Index[Array, "num_seqs"]
    """Tokens each request is given this step, in ``[0, width]``."""
    num_generated: Index[Array, "num_seqs"]
    """Tokens each request was given before this step."""
    max_new_tokens: Index[Array, "num_seqs"]
    """The most tokens each request may be given in total."""
    stop_token_ids: Index[Array, "num_seqs num_stops"]
    """Each request's stop ids (its end-of-sequence id included), ``-1`` padded."""
    finished: Bool[Array, "num_seqs"]
    """Whether each request is marked finished once it has these tokens."""


_OUTPUT = ("RequestOutput",)


def _columns(out: RequestOutput) -> Any:
    return arange_like(out.token_ids, out.token_ids.shape[1])[None, :]


def _stops(out: RequestOutput) -> Any:
    """``[num_seqs, width]``: where a row holds one of its request's stop ids."""
    tokens, stops = out.token_ids, out.stop_token_ids
    hits = tokens < tokens  # all False, on the tokens' backend and device
    for column in range(stops.shape[1]):  # a few stop ids: one pass each, no 3-D array
        stop = stops[:, column:column + 1]
        hits = hits | ((tokens == stop) & (stop >= 0))
    return hits


def _emitted(out: RequestOutput) -> Any:
    """``[num_seqs, width]``: the columns a row emits."""
    return _columns(out) < out.num_emitted[:, None]


@rule("SG401", "output rows are the emitted vocabulary ids, then -1",
      boundary=Boundary.OUTPUT, applies_to=_OUTPUT,
      fields={"token_ids", "num_emitted", "num_generated", "stop_token_ids", "vocab_size"},
      bug="SGLang #39826: the accepted block was counted before the stop trim, so usage "
      "counted tokens the output no longer held.", depth=Depth.ESSENTIAL)
def _layout(out: RequestOutput, values: ValueChecks) -> Finding | None:
    """Detokenizers, usage counts and streaming deltas take a row's first
    ``num_emitted`` tokens and trust that they are real ids; a count outside the row, an
    id outside the vocabulary among them, or a token left behind them means the count and
    the tokens disagree about what the request was given. A stop id outside the
    vocabulary can never match: the request it should end runs to its limit."""
    counts, width = out.num_emitted, out.token_ids.shape[1]
    found = values.outside(counts, 0, width + 1, lambda i: Finding(
        f"emitted count{value_text(counts, i)}", "num_emitted", position=i,
        expected=f"0..width={width}"))
    if found:
        return found
    found = values.below(out.num_generated, 0, lambda i: Finding(
        f"tokens given before{value_text(out.num_generated, i)}", "num_generated",
        position=i, expected=">= 0"))
    if found:
        return found
    stops, vocab = out.stop_token_ids, int(out.vocab_size)
    found = values.outside(stops, -1, vocab, lambda i: Finding(
        f"stop id{value_text(stops, i)}", "stop_token_ids",
        position=row_col(i, stops.shape[1])[0],
        expected=f"-1 or 0 <= id < vocab_size={vocab}"))
    if found:
        return found
    tokens, emitted = out.token_ids, _emitted(out)
    outside = scalar_mask(tokens, "lt", 0) | scalar_mask(tokens, "ge", vocab)
    bad = (emitted & outside) | (~emitted & (tokens != _NONE))

    def explain(i: int) -> Finding:
        row, col = row_col(i, width)
        kind = "emitted" if col < (host_value(counts, row) or 0) else "padding"
        return Finding(f"column {col} ({kind}){value_text(tokens, i)}", "token_ids",
                       position=row, expected=f"{host_value(counts, row)} emitted "
                       f"vocabulary ids, then -1")

    return values.any_true(bad, explain)


@rule("SG402", "nothing is emitted after an accepted stop token",
      boundary=Boundary.OUTPUT, applies_to=_OUTPUT,
      fields={"token_ids", "num_emitted", "stop_token_ids"},
      bug="transformers #47912: MTP / assisted decoding emitted the tokens after an EOS "
      "accepted mid-block; SGLang #31599: a max_new_tokens cap checked first hid a stop "
      "inside the accepted block and leaked the tokens after it.", depth=Depth.ESSENTIAL)
def _nothing_after_stop(out: RequestOutput, values: ValueChecks) -> Finding | None:
    """A verify row can accept a stop token as a draft and carry more tokens after it:
    the target model agreed with the drafts past the end. The request ends at the stop;
    what follows it is not output, and a client streaming it shows text the model never
    meant to write."""
    tokens, width = out.token_ids, out.token_ids.shape[1]
    if width == 0:
        return None
    # The tokens the row really gives: a count past them, or a -1 among them, is SG401's.
    columns = _columns(out)
    real = _emitted(out) & (tokens >= 0)
    marks = real * (columns + 1)
    last = marks.amax(dim=1) if array_kind(tokens) == "torch" else marks.max(axis=1)
    stop_then_more = _stops(out) & real & (columns + 1 < last[:, None])

    def explain(i: int) -> Finding:
        row, col = row_col(i, width)
        after = (host_value(last, row) or 0) - col - 1
        follow = "token follows" if after == 1 else "tokens follow"
        return Finding(f"column {col} is stop id{number_text(tokens, i)}, and {after} more "
                       f"{follow} it", "token_ids", position=row,
                       expected=f"nothing after column {col}")

    return values.any_true(stop_then_more, explain)


@rule("SG403", "no request is given more than max_new_tokens",
      boundary=Boundary.OUTPUT, applies_to=_OUTPUT,
      fields={"num_emitted", "num_generated", "max_new_tokens"},
      bug="SGLang #33758: a multi-token accept run that crossed max_new_tokens had to be "
      "capped at the limit, or the request was given more than it asked for.",
      depth=Depth.ESSENTIAL)
def _within_limit(out: RequestOutput, values: ValueChecks) -> Finding | None:
    """A step may confirm up to ``mtp_k + 1`` tokens of a request that needs only one
    more: everything past the limit is cut. A request given more than it asked for
    breaks the API's promise and every usage count built on it."""
    total = out.num_generated + out.num_emitted
    return values.any_true(total > out.max_new_tokens, lambda i: Finding(
        f"given {host_value(out.num_generated, i)} tokens before and "
        f"{host_value(out.num_emitted, i)} now", "num_emitted", position=i,
        expected=f"at most max_new_tokens={host_value(out.max_new_tokens, i)} in total"))


@rule("SG404", "a request whose output hit a stop or the limit is marked finished",
      boundary=Boundary.OUTPUT, applies_to=_OUTPUT,
      fields={"finished", "token_ids", "num_emitted", "num_generated", "max_new_tokens",
              "stop_token_ids"},
      bug="SGLang #31599: a stop inside a speculative accept run was hidden by the length "
      "check, so the request finished for the wrong reason, after tokens past its stop.",
      depth=Depth.ESSENTIAL)
def _finished(out: RequestOutput, values: ValueChecks) -> Finding | None:
    """A request given its stop token, or its last allowed token, is done: left
    running, it is scheduled again, generates past its end and holds its KV blocks."""
    last = _columns(out) == (out.num_emitted[:, None] - 1)
    hit_stop = (_stops(out) & last).any(1)
    hit_limit = out.num_generated + out.num_emitted >= out.max_new_tokens
    done = (hit_stop | hit_limit) & (out.num_emitted > 0)

    def explain(i: int) -> Finding:
        reason = f"reached max_new_tokens={host_value(out.max_new_tokens, i)}"
        if not bool(host_value(hit_limit, i)):
            reason = "emitted a stop token last"
        return Finding(f"{reason} but is not marked finished", "finished", position=i,
                       expected="finished")

    return values.any_true(done & ~out.finished, explain)
