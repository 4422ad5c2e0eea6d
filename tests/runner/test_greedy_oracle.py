"""The oracle: plain greedy decoding, and where two token streams part."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from engine_builders import MODEL, requests_of

from specguard.runner.attention import make_group
from specguard.runner.oracle import Divergence, first_divergence, greedy_reference


def _tokens(*values):
    return np.array(values, dtype=np.int64)


def test_identical_streams_have_no_divergence():
    """Equal outputs for every request compare as identical."""
    outputs = {0: _tokens(1, 2, 3), 1: _tokens(4)}
    assert first_divergence(outputs, {k: v.copy() for k, v in outputs.items()}) is None


def test_first_mismatch_by_request_then_position():
    """The lowest request id with a difference, at its first differing position."""
    expected = {0: _tokens(1, 2, 3), 1: _tokens(4, 5, 6)}
    actual = {0: _tokens(1, 2, 3), 1: _tokens(4, 9, 0)}
    found = first_divergence(expected, actual)
    assert found is not None and found == Divergence(1, 1, 5, 9)
    assert found.describe() == "request 1, output position 1: expected 5, got 9"


def test_missing_or_short_output_is_a_divergence():
    """A request with fewer tokens (or none) diverges where its output ends."""
    expected = {0: _tokens(1, 2), 1: _tokens(3)}
    assert first_divergence(expected, {0: _tokens(1)}) == Divergence(0, 1, 2, None)
    assert first_divergence(expected, {0: _tokens(1, 2)}) == Divergence(1, 0, 3, None)
    assert "expected 3, got nothing" in Divergence(1, 0, 3, None).describe()


def test_reference_is_greedy_one_token_at_a_time():
    """Each oracle token is the argmax after the prompt and the tokens before it."""
    request = requests_of([12], max_tokens=4, seed=5)[0]
    output = greedy_reference(MODEL, [request])[0]
    assert len(output) == 4
    sequence = list(request.prompt)
    for token in output:
        ids = torch.tensor(sequence)
        positions = torch.arange(len(sequence))
        group = make_group(positions[None, :], positions[None, :], positions)
        hidden = MODEL.forward(ids, positions, positions, [group],
                               MODEL.new_cache(len(sequence)))
        assert int(MODEL.greedy(hidden[-1:])[0]) == token
        sequence.append(int(token))


def test_reference_counts_every_token_it_produces():
    """The progress callback hears of exactly max_tokens per request."""
    requests = requests_of([5, 30, 9], max_tokens=6)
    counted: list[int] = []
    outputs = greedy_reference(MODEL, requests, on_tokens=counted.append)
    assert sum(counted) == 18
    assert [len(outputs[r.request_id]) for r in requests] == [6, 6, 6]


def test_reference_never_gives_a_request_a_token_it_bans():
    """A constrained request's tokens are the argmax among the tokens it allows: its
    unconstrained greedy tokens, banned, are replaced by others."""
    [request] = requests_of([12], max_tokens=6, seed=5)
    free = greedy_reference(MODEL, [request])[0]
    banned = dataclasses.replace(request, banned_token_ids=(int(free[0]), int(free[3])))
    constrained = greedy_reference(MODEL, [banned])[0]
    assert int(constrained[0]) != int(free[0])
    assert not set(constrained.tolist()) & set(banned.banned_token_ids)
    sequence = list(request.prompt)
    for token in constrained:
        ids = torch.tensor(sequence)
        positions = torch.arange(len(sequence))
        group = make_group(positions[None, :], positions[None, :], positions)
        hidden = MODEL.forward(ids, positions, positions, [group],
                               MODEL.new_cache(len(sequence)))
        logits = MODEL.logits(hidden[-1])
        logits[list(banned.banned_token_ids)] = float("-inf")
        assert int(logits.argmax()) == token
        sequence.append(int(token))
