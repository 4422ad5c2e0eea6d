"""Small random workloads for the reference engine, feasible by construction.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from strategies.cases import Draw, seeded_rng


@dataclass(frozen=True)
class Workload:
    """An engine configuration and the requests to run through it."""

    config: Any
    requests: tuple[Any, ...]

    def __repr__(self) -> str:
        c = self.config
        lengths = [r.prompt_len for r in self.requests]
        return (f"Workload(mtp_k={c.mtp_k}, block_size={c.block_size}, "
                f"num_blocks={c.num_blocks}, max_num_seqs={c.max_num_seqs}, "
                f"budget={c.max_num_batched_tokens}, vocab={c.model.vocab_size}, "
                f"seed={c.model.seed}, prompts={lengths}, "
                f"max_tokens={[r.max_tokens for r in self.requests]})")


#: How a workload leans on the engine: "none", "chunked" (prompts longer than the token
#: budget, so steps of prefill chunks only), "tight" (few KV blocks: preemption) or
#: "constrained" (half the requests ban half the vocabulary) or "remote" (a P/D decode
#: instance: requests after the first are prefilled elsewhere, at random).
PRESSURES = ("none", "chunked", "tight", "constrained", "remote")


@st.composite
def engine_workloads(draw: Draw, pressure: str = "none") -> Workload:
    """Small random workloads for the reference engine, feasible by construction."""
    from specguard.runner.config import EngineConfig, ModelConfig
    from specguard.runner.kv_cache import blocks_for
    from specguard.runner.workload import Request, constrain

    rng = seeded_rng(draw)
    mtp_k = draw(st.integers(1, 5))
    n = draw(st.integers(3 if pressure == "tight" else 1, 10))
    budget = draw(st.integers(mtp_k + 1, 24 if pressure == "chunked" else 256))
    shortest = budget + 1 if pressure == "chunked" else draw(st.integers(1, 32))
    longest = draw(st.integers(shortest, shortest + 64))
    prompts = rng.integers(shortest, longest + 1, n)
    outputs = rng.integers(8 if pressure == "tight" else 1, draw(st.integers(8, 24)) + 1, n)
    block_size = draw(st.sampled_from((1, 2, 4, 16)))
    # The largest request with two steps of drafts in flight must fit on its own.
    alone = blocks_for(int(longest + outputs.max() + 2 * (mtp_k + 1)), block_size) + 1
    ample = alone * (n + 1)
    num_blocks = draw(st.integers(alone, 2 * alone)) if pressure == "tight" else ample
    vocab = draw(st.sampled_from((61, 257, 2048)))
    model = ModelConfig(vocab_size=vocab, d_model=32, num_heads=2, num_layers=1, d_ff=64,
                        seed=draw(st.integers(0, 3)))
    # "short-drafter": the drafter's context ends before the longer seqs finish.
    drafter_limit = (draw(st.integers(shortest, longest + int(outputs.max())))
                     if pressure == "short-drafter" else None)
    config = EngineConfig(mtp_k=mtp_k, block_size=block_size, num_blocks=num_blocks,
                          max_num_seqs=draw(st.integers(1, 12)),
                          max_num_batched_tokens=budget, model=model,
                          drafter_max_model_len=drafter_limit)
    requests = tuple(Request(i, rng.integers(0, vocab, int(p)).astype(np.int64), int(m))
                     for i, (p, m) in enumerate(zip(prompts, outputs, strict=True)))
    if pressure == "constrained":
        requests = tuple(constrain(requests, vocab_size=vocab, share=0.5,
                                   seed=draw(st.integers(0, 3))))
    if pressure == "remote":
        requests = tuple(dataclasses.replace(r, remote_prefill=bool(i and rng.random() < 0.6))
                         for i, r in enumerate(requests))
    return Workload(config, requests)
