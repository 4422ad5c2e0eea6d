"""Synthetic requests: random prompts of mixed lengths, a fixed number of output tokens,
and, for some, banned tokens."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["BANNED_SHARE", "Request", "constrain", "synthetic_requests"]

#: The share of the vocabulary a constrained synthetic request bans: enough that the
#: bans, or another request's, change most of its tokens.
BANNED_SHARE = 0.5


@dataclass(frozen=True)
class Request:
    """One generation request: greedy decoding of ``max_tokens`` tokens after ``prompt``,
    or fewer when it generates one of its ``stop_token_ids`` (which it is given)."""

    request_id: int
    prompt: np.ndarray
    max_tokens: int
    stop_token_ids: tuple[int, ...] = ()
    """Ids that end the request once generated: its end-of-sequence id, its stop ids."""
    banned_token_ids: tuple[int, ...] = ()
    """Ids the request must never be given (a grammar's forbidden tokens): each of its
    tokens is the greedy choice among the others."""
    remote_prefill: bool = False
    """Prefilled on another instance (P/D disaggregation): this engine receives the
    prompt's KV, the first token and the prefill instance's drafts, and only decodes."""

    @property
    def prompt_len(self) -> int:
        """Tokens in the prompt."""
        return int(self.prompt.shape[0])


def synthetic_requests(
    num_requests: int, *, vocab_size: int, seed: int = 0, min_prompt: int = 16,
    max_prompt: int = 2048, max_tokens: int = 128, constrained: float = 0.0,
    remote: float = 0.0,
) -> list[Request]:
    """``num_requests`` requests with prompt lengths drawn uniformly from
    ``[min_prompt, max_prompt]`` and token ids uniformly from the vocabulary; a
    ``constrained`` share of them ban tokens (see :func:`constrain`), and a ``remote``
    share of them, never the first, are prefilled on another instance (P/D)."""
    if not 1 <= min_prompt <= max_prompt:
        raise ValueError(f"need 1 <= min_prompt <= max_prompt, got {min_prompt}, {max_prompt}")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_prompt, max_prompt + 1, size=num_requests)
    requests = [
        Request(index, rng.integers(0, vocab_size, size=int(n)).astype(np.int64), max_tokens)
        for index, n in enumerate(lengths)
    ]
    if not 0.0 <= remote <= 1.0:
        raise ValueError(f"need 0 <= remote <= 1, got {remote}")
    if remote:
        # A generator of its own, so the prompts of a seed do not depend on the choice.
        chosen = np.random.default_rng([seed, 2]).random(num_requests) < remote
        chosen[:1] = False  # the engine's first step prefills here, as a decode instance's
        requests = [dataclasses.replace(r, remote_prefill=True) if pick else r
                    for r, pick in zip(requests, chosen, strict=True)]
    return constrain(requests, vocab_size=vocab_size, share=constrained, seed=seed)


def constrain(requests: Sequence[Request], *, vocab_size: int, share: float = 1.0,
              seed: int = 0) -> list[Request]:
    """``requests`` with a ``share`` of them, drawn at random, banning a random
    :data:`BANNED_SHARE` of the vocabulary each (its own draw)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"need 0 <= share <= 1, got {share}")
    if share == 0.0:
        return list(requests)
    # A generator of its own, so the prompts of a seed do not depend on the bans.
    rng = np.random.default_rng([seed, 1])
    chosen = rng.random(len(requests)) < share
    banned = max(1, int(vocab_size * BANNED_SHARE))
    return [dataclasses.replace(request, banned_token_ids=tuple(
                int(t) for t in np.sort(rng.choice(vocab_size, banned, replace=False))))
            if pick else request for request, pick in zip(requests, chosen, strict=True)]
