"""The reference answer: plain greedy autoregressive decoding of the same model.

No scheduler, no paging, no drafts: each prompt is prefilled in one pass and then one
token is generated per forward, the greedy choice among the tokens its request does not
ban. Greedy speculative decoding must reproduce these tokens
exactly; :func:`first_divergence` says where it does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specguard.runner.attention import make_group
from specguard.runner.kv_cache import KVCache
from specguard.runner.model import TinyLM
from specguard.runner.workload import Request

__all__ = ["Divergence", "first_divergence", "greedy_reference"]

#: Requests decoded together; bounds the oracle's KV cache.
WAVE = 16


def greedy_reference(
    model: TinyLM, requests: Sequence[Request],
    on_tokens: Callable[[int], object] | None = None,
) -> dict[int, np.ndarray]:
    """The greedy continuation of every request, keyed by request id."""
    outputs: dict[int, np.ndarray] = {}
    for start in range(0, len(requests), WAVE):
        outputs.update(_wave(model, requests[start:start + WAVE], on_tokens))
    return outputs


def _wave(
    model: TinyLM, requests: Sequence[Request], on_tokens: Callable[[int], object] | None,
) -> dict[int, np.ndarray]:
    capacity = [r.prompt_len + r.max_tokens for r in requests]
    bases = np.concatenate(([0], np.cumsum(capacity)[:-1])).astype(np.int64)
    cache = model.new_cache(int(sum(capacity)))
    banned = _banned(model, requests)
    generated = [[_prefill(model, cache, r, int(b), banned[i:i + 1])]
                 for i, (r, b) in enumerate(zip(requests, bases, strict=True))]
    lengths = np.array([r.prompt_len for r in requests], dtype=np.int64)
    _report(on_tokens, len(requests))
    while True:
        active = [i for i, r in enumerate(requests) if len(generated[i]) < r.max_tokens]
        if not active:
            break
        tokens = _decode_step(model, cache, [generated[i][-1] for i in active],
                              lengths[active], bases[active], banned[active])
        for i, token in zip(active, tokens, strict=True):
            generated[i].append(token)
        lengths[active] += 1
        _report(on_tokens, len(active))
    return {r.request_id: _through_stop(g[:r.max_tokens], r.stop_token_ids)
            for r, g in zip(requests, generated, strict=True)}


def _through_stop(tokens: list[int], stops: tuple[int, ...]) -> np.ndarray:
    """The tokens up to and including the first stop id (all of them without one)."""
    hits = [i for i, token in enumerate(tokens) if token in stops]
    return np.array(tokens[:hits[0] + 1] if hits else tokens, dtype=np.int64)


def _report(on_tokens: Callable[[int], object] | None, count: int) -> None:
    if on_tokens is not None:
        on_tokens(count)


def _banned(model: TinyLM, requests: Sequence[Request]) -> torch.Tensor:
    """``[requests, vocab_size]``: True where the request bans the token."""
    banned = torch.zeros((len(requests), model.vocab_size), dtype=torch.bool)
    for row, request in enumerate(requests):
        banned[row, list(request.banned_token_ids)] = True
    return banned.to(model.device)


def _greedy(model: TinyLM, hidden: torch.Tensor, banned: torch.Tensor) -> torch.Tensor:
    """The argmax token of each row among the tokens its request does not ban."""
    return model.logits(hidden).masked_fill(banned, float("-inf")).argmax(dim=-1)


def _prefill(model: TinyLM, cache: KVCache, request: Request, base: int,
             banned: torch.Tensor) -> int:
    device = model.device
    positions = torch.arange(request.prompt_len, device=device)
    slots = positions + base
    group = make_group(positions[None, :], slots[None, :], positions)
    ids = torch.as_tensor(request.prompt, device=device)
    hidden = model.forward(ids, positions, slots, [group], cache)
    return int(_greedy(model, hidden[-1:], banned)[0])


def _decode_step(
    model: TinyLM, cache: KVCache, last_tokens: list[int], lengths: np.ndarray,
    bases: np.ndarray, banned: torch.Tensor,
) -> list[int]:
    device = model.device
    positions = torch.as_tensor(lengths, device=device)
    base = torch.as_tensor(bases, device=device)
    width = int(lengths.max()) + 1
    key_slots = (base[:, None] + torch.arange(width, device=device)).clamp(max=cache.num_slots)
    rows = torch.arange(len(last_tokens), device=device)[:, None]
    group = make_group(rows, key_slots, positions)
    ids = torch.as_tensor(last_tokens, device=device, dtype=torch.int64)
    hidden = model.forward(ids, positions, positions + base, [group], cache)
    return [int(t) for t in _greedy(model, hidden, banned).tolist()]


@dataclass(frozen=True)
class Divergence:
    """The first output token where the engine and the oracle disagree."""

    request_id: int
    position: int
    expected: int | None
    actual: int | None

    def describe(self) -> str:
        """``request 7, output position 12: expected 311, got 95``."""
        def show(token: int | None) -> str:
            return "nothing" if token is None else str(token)

        return (f"request {self.request_id}, output position {self.position}: "
                f"expected {show(self.expected)}, got {show(self.actual)}")


def first_divergence(
    expected: Mapping[int, np.ndarray], actual: Mapping[int, np.ndarray]
) -> Divergence | None:
    """The first disagreement, by request id then position; None when identical."""
    for request_id in sorted(expected):
        want = expected[request_id]
        got = actual.get(request_id, np.zeros(0, dtype=np.int64))
        common = min(len(want), len(got))
        mismatch = np.flatnonzero(want[:common] != got[:common])
        if mismatch.size:
            i = int(mismatch[0])
            return Divergence(request_id, i, int(want[i]), int(got[i]))
        if len(want) != len(got):
            return Divergence(request_id, common,
                              int(want[common]) if common < len(want) else None,
                              int(got[common]) if common < len(got) else None)
    return None
