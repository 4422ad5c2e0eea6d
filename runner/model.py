"""A tiny causal transformer LM with an MTP head; random weights from a fixed seed.

Everything runs in float64. Greedy speculative decoding must reproduce plain greedy
decoding token for token, and the engine computes a token's logits in batches of other
shapes than the oracle does (a prefill chunk, a decode span, one token at a time). In
float64 those shapes change results by a few ulps at most, far below the gap between the
two best logits, so the argmax is the same; float32 would not leave that margin.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specguard.runner.attention import AttentionGroup, attend
from specguard.runner.config import ModelConfig
from specguard.runner.kv_cache import KVCache

__all__ = ["DTYPE", "Layer", "TinyLM", "rms_norm"]

DTYPE = torch.float64
#: Radians the MTP head's slowest feature pair turns per position of offset.
MTP_MIN_ANGLE = 1.0
#: How many times faster its fastest pair turns.
MTP_ANGLE_SPREAD = 2.0


def rms_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Scale each row to unit root-mean-square."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


@dataclass(frozen=True)
class Layer:
    """One transformer block's weights."""

    wq: torch.Tensor
    wk: torch.Tensor
    wv: torch.Tensor
    wo: torch.Tensor
    w_up: torch.Tensor
    w_down: torch.Tensor


def _mlp(x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(x @ w_up) @ w_down


class TinyLM:
    """Target model and MTP head; the head shares the embedding and the output head."""

    def __init__(self, config: ModelConfig, device: torch.device | str = "cpu") -> None:
        self.config = config
        self.device = torch.device(device)
        generator = torch.Generator().manual_seed(config.seed)
        d, f, v = config.d_model, config.d_ff, config.vocab_size

        def weight(rows: int, cols: int, std: float) -> torch.Tensor:
            values = torch.randn(rows, cols, generator=generator, dtype=DTYPE) * std
            return values.to(self.device)

        self.embed_tokens = weight(v, d, 1.0)
        self.layers = [
            Layer(wq=weight(d, d, d ** -0.5), wk=weight(d, d, d ** -0.5),
                  wv=weight(d, d, d ** -0.5), wo=weight(d, d, d ** -0.5),
                  w_up=weight(d, f, d ** -0.5), w_down=weight(f, d, f ** -0.5))
            for _ in range(config.num_layers)
        ]
        self.lm_head = weight(v, d, d ** -0.5)
        self.mtp_hidden = weight(d, d, d ** -0.5)
        half = config.head_dim // 2
        exponents = torch.arange(half, dtype=DTYPE) / half
        self._inv_freq = (config.rope_base ** -exponents).to(self.device)
        # The head's rotation turns every pair of its state's features by at least
        # MTP_MIN_ANGLE per position: its draft steps must tell a context end one position
        # off from the right one, where the target's slowest frequencies barely move.
        pairs = d // 2
        self._mtp_freq = (MTP_MIN_ANGLE * MTP_ANGLE_SPREAD ** (torch.arange(pairs, dtype=DTYPE)
                                                               / pairs)).to(self.device)

    @property
    def vocab_size(self) -> int:
        """Rows of the embedding table."""
        return self.config.vocab_size

    def new_cache(self, num_slots: int) -> KVCache:
        """An empty KV cache with ``num_slots`` slots for every layer."""
        c = self.config
        return KVCache(num_layers=c.num_layers, num_slots=num_slots, num_heads=c.num_heads,
                       head_dim=c.head_dim, device=self.device, dtype=DTYPE)

    def embed(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Embedding lookup; an id outside ``[0, vocab_size)`` fails like any index."""
        return torch.nn.functional.embedding(token_ids, self.embed_tokens)

    @torch.inference_mode()
    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, slot_mapping: torch.Tensor,
        groups: list[AttentionGroup], cache: KVCache,
    ) -> torch.Tensor:
        """Final normalised hidden states ``[tokens, d_model]``; writes K/V at the slots."""
        c = self.config
        x = self.embed(input_ids)
        cos, sin = self._rotation(positions)
        for index, layer in enumerate(self.layers):
            h = rms_norm(x)
            q = self._rotate((h @ layer.wq).view(-1, c.num_heads, c.head_dim), cos, sin)
            k = self._rotate((h @ layer.wk).view(-1, c.num_heads, c.head_dim), cos, sin)
            v = (h @ layer.wv).view(-1, c.num_heads, c.head_dim)
            cache.write(index, slot_mapping, k, v)
            mixed = attend(q, cache.keys[index], cache.values[index], groups)
            x = x + c.residual_scale * (mixed.reshape(-1, c.d_model) @ layer.wo)
            x = x + c.residual_scale * _mlp(rms_norm(x), layer.w_up, layer.w_down)
        return rms_norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Output logits ``[rows, vocab_size]`` of normalised hidden states."""
        return hidden @ self.lm_head.T

    def greedy(self, hidden: torch.Tensor) -> torch.Tensor:
        """The argmax token of each row."""
        return self.logits(hidden).argmax(dim=-1)

    @torch.inference_mode()
    def mtp_step(self, hidden: torch.Tensor, token_ids: torch.Tensor,
                 offsets: torch.Tensor | None = None) -> torch.Tensor:
        """One MTP step: from a hidden state and the next token, the state that predicts
        the token after it (read with :meth:`greedy`); ``offsets`` as for
        :meth:`mtp_step_embedded`."""
        return self.mtp_step_embedded(hidden, self.embed(token_ids), offsets)

    def mtp_step_embedded(self, hidden: torch.Tensor, embedded: torch.Tensor,
                          offsets: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`mtp_step` for tokens that are already embedded.

        The head mixes the previous hidden state into the token's embedding and runs the
        target's MLPs without attention: it knows the target's per-token function but not
        what attention adds from the context, which is what its drafts get wrong.

        ``offsets`` (a draft step after the first) is, per row, how far the token's
        position lies past the end of the context its attention metadata gives it
        (``position - (seq_len - 1)``). The head's state is rotated by that distance, as
        a rotary query is against the newest key it reads: 0 where the metadata was
        advanced with the draft step, which leaves the state as it is; any other distance
        turns it away from what the target would compute there, and the draft is lost.
        """
        c = self.config
        g = embedded + c.mtp_hidden_scale * (hidden @ self.mtp_hidden)
        if offsets is not None:
            g = self._rotate_state(g, offsets)
        for layer in self.layers:
            g = g + c.residual_scale * _mlp(rms_norm(g), layer.w_up, layer.w_down)
        return rms_norm(g)

    def _rotate_state(self, state: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        angles = offsets.to(DTYPE)[:, None] * self._mtp_freq[None, :]
        first, second = state.chunk(2, dim=-1)
        cos, sin = torch.cos(angles), torch.sin(angles)
        return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)

    def _rotation(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angles = positions.to(DTYPE)[:, None] * self._inv_freq[None, :]
        return torch.cos(angles)[:, None, :], torch.sin(angles)[:, None, :]

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        first, second = x.chunk(2, dim=-1)
        return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)
