"""The tiny model: reproducible weights, and logits that do not depend on batch shape."""

from __future__ import annotations

import pytest
import torch

from specguard.runner.attention import make_group
from specguard.runner.config import ModelConfig
from specguard.runner.model import TinyLM

CONFIG = ModelConfig()
MODEL = TinyLM(CONFIG)


def _prefill(model: TinyLM, tokens: torch.Tensor, chunks: list[int]) -> torch.Tensor:
    """Hidden states of ``tokens`` prefilled in chunks of the given sizes."""
    cache = model.new_cache(tokens.shape[0])
    hidden, start = [], 0
    for size in chunks:
        positions = torch.arange(start, start + size)
        keys = torch.arange(start + size)[None, :]
        group = make_group(torch.arange(size)[None, :], keys, positions)
        hidden.append(model.forward(tokens[start:start + size], positions, positions,
                                    [group], cache))
        start += size
    return torch.cat(hidden)


def test_same_seed_same_weights_other_seed_other_weights():
    """Weights come from the seed alone."""
    again = TinyLM(CONFIG)
    other = TinyLM(ModelConfig(seed=1))
    assert torch.equal(MODEL.embed_tokens, again.embed_tokens)
    assert not torch.equal(MODEL.embed_tokens, other.embed_tokens)


def test_chunked_prefill_matches_one_pass_to_the_last_bits():
    """Chunking changes matmul shapes; float64 keeps the difference at rounding level."""
    tokens = torch.randint(0, CONFIG.vocab_size, (96,), generator=torch.Generator().manual_seed(0))
    whole = _prefill(MODEL, tokens, [96])
    chunked = _prefill(MODEL, tokens, [40, 1, 55])
    assert (whole - chunked).abs().max().item() < 1e-12
    assert torch.equal(MODEL.greedy(whole), MODEL.greedy(chunked))


def test_positions_change_the_output():
    """Rotary positions matter: the same tokens one position later give other states."""
    tokens = torch.randint(0, CONFIG.vocab_size, (8,), generator=torch.Generator().manual_seed(1))
    cache = MODEL.new_cache(16)
    rows = torch.arange(8)[None, :]
    at_zero = MODEL.forward(tokens, torch.arange(8), torch.arange(8),
                            [make_group(rows, torch.arange(8)[None, :], torch.arange(8))], cache)
    shifted = torch.arange(1, 9)
    at_one = MODEL.forward(tokens, shifted, shifted,
                           [make_group(rows, torch.arange(9)[None, :], shifted)], cache)
    assert (at_zero[1:] - at_one[1:]).abs().max().item() > 1e-3


def test_embedding_rejects_a_sentinel():
    """A -1 reaching the embedding fails like any out-of-range index (CPU IndexError)."""
    with pytest.raises(IndexError, match="index out of range"):
        MODEL.embed(torch.tensor([3, -1]))


def test_mtp_head_guesses_the_target_often():
    """The head predicts the token after next well enough for speculation to pay."""
    tokens = torch.randint(0, CONFIG.vocab_size, (200,), generator=torch.Generator().manual_seed(2))
    hidden = _prefill(MODEL, tokens, [200])
    target_next = MODEL.greedy(hidden)                     # token after each position
    guesses = MODEL.greedy(MODEL.mtp_step(hidden[:-1], tokens[1:]))
    agreement = (guesses == target_next[1:]).double().mean().item()
    assert agreement > 0.5


def test_mtp_head_at_its_context_end_is_unrotated_and_one_position_off_is_lost():
    """A draft step whose token is where its context ends (offset 0) is exactly the
    head's plain step; one position off in either direction, its guesses no longer
    agree with the target's."""
    tokens = torch.randint(0, CONFIG.vocab_size, (200,), generator=torch.Generator().manual_seed(2))
    hidden = _prefill(MODEL, tokens, [200])
    target_next = MODEL.greedy(hidden)[1:]
    plain = MODEL.mtp_step(hidden[:-1], tokens[1:])
    at_end = MODEL.mtp_step(hidden[:-1], tokens[1:], torch.zeros(199, dtype=torch.int64))
    assert torch.equal(plain, at_end)
    for offset in (1, -1, 2):
        moved = MODEL.mtp_step(hidden[:-1], tokens[1:],
                               torch.full((199,), offset, dtype=torch.int64))
        agreement = (MODEL.greedy(moved) == target_next).double().mean().item()
        assert agreement < 0.2, offset
