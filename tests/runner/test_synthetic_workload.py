"""Synthetic requests: reproducible, within the requested bounds."""

from __future__ import annotations

import re

import numpy as np
import pytest

from specguard.runner.workload import BANNED_SHARE, constrain, synthetic_requests


def test_same_seed_same_requests():
    """A seed fixes prompt lengths and tokens."""
    first = synthetic_requests(5, vocab_size=100, seed=3)
    again = synthetic_requests(5, vocab_size=100, seed=3)
    assert all(np.array_equal(a.prompt, b.prompt) for a, b in zip(first, again, strict=True))
    other = synthetic_requests(5, vocab_size=100, seed=4)
    assert [r.prompt_len for r in other] != [r.prompt_len for r in first]


def test_prompts_respect_bounds_and_vocabulary():
    """Lengths fall in [min_prompt, max_prompt]; tokens in [0, vocab_size)."""
    requests = synthetic_requests(50, vocab_size=10, seed=0, min_prompt=3, max_prompt=7,
                                  max_tokens=5)
    assert {r.prompt_len for r in requests} <= set(range(3, 8))
    assert all(r.prompt.min() >= 0 and r.prompt.max() < 10 for r in requests)
    assert [r.request_id for r in requests] == list(range(50))
    assert all(r.max_tokens == 5 for r in requests)


def test_bad_prompt_bounds_are_refused():
    """min_prompt above max_prompt, or below 1, is a ValueError."""
    with pytest.raises(ValueError, match="min_prompt <= max_prompt"):
        synthetic_requests(1, vocab_size=10, min_prompt=5, max_prompt=4)


def test_no_request_bans_tokens_by_default():
    """Bans are opt-in: the default workload, and its prompts, are as they always were."""
    plain = synthetic_requests(6, vocab_size=100, seed=2)
    constrained = synthetic_requests(6, vocab_size=100, seed=2, constrained=0.5)
    assert all(r.banned_token_ids == () for r in plain)
    assert all(np.array_equal(a.prompt, b.prompt) for a, b in zip(plain, constrained,
                                                                  strict=True))


def test_a_share_of_the_requests_ban_half_the_vocabulary():
    """``constrained`` picks that share of the requests at random; each bans its own
    draw of half the vocabulary, distinct ids in range."""
    requests = synthetic_requests(200, vocab_size=40, seed=1, max_prompt=20,
                                  constrained=0.25)
    banned = [r.banned_token_ids for r in requests if r.banned_token_ids]
    assert 25 <= len(banned) <= 75
    assert all(len(ids) == len(set(ids)) == int(40 * BANNED_SHARE) for ids in banned)
    assert all(min(ids) >= 0 and max(ids) < 40 for ids in banned)
    assert len(set(banned)) == len(banned)
    every = constrain(requests[:5], vocab_size=40)
    assert all(r.banned_token_ids for r in every)


def test_a_share_outside_zero_to_one_is_refused():
    """A share of requests is a fraction."""
    with pytest.raises(ValueError, match=re.escape("0 <= share <= 1, got 1.5")):
        synthetic_requests(1, vocab_size=10, constrained=1.5)
