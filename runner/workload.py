"""Synthetic requests: random prompts of mixed lengths, a fixed number of output tokens."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Request", "synthetic_requests"]


@dataclass(frozen=True)
class Request:
    """One generation request: greedy decoding of ``max_tokens`` tokens after ``prompt``,
    or fewer when it generates one of its ``stop_token_ids`` (which it is given)."""

    request_id: int
    prompt: np.ndarray
    max_tokens: int
    stop_token_ids: tuple[int, ...] = ()
    """Ids that end the request once generated: its end-of-sequence id, its stop ids."""

    @property
    def prompt_len(self) -> int:
        """Tokens in the prompt."""
        return int(self.prompt.shape[0])


def synthetic_requests(
    num_requests: int, *, vocab_size: int, seed: int = 0, min_prompt: int = 16,
    max_prompt: int = 2048, max_tokens: int = 128,
) -> list[Request]:
    """``num_requests`` requests with prompt lengths drawn uniformly from
    ``[min_prompt, max_prompt]`` and token ids uniformly from the vocabulary."""
    if not 1 <= min_prompt <= max_prompt:
        raise ValueError(f"need 1 <= min_prompt <= max_prompt, got {min_prompt}, {max_prompt}")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_prompt, max_prompt + 1, size=num_requests)
    return [
        Request(index, rng.integers(0, vocab_size, size=int(n)).astype(np.int64), max_tokens)
        for index, n in enumerate(lengths)
    ]
