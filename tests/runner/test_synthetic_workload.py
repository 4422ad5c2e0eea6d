"""Synthetic requests: reproducible, within the requested bounds."""

from __future__ import annotations

import numpy as np
import pytest

from specguard.runner.workload import synthetic_requests


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
