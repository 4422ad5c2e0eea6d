"""Small engines and hand-made workloads for the runner tests.

Budgets, caches and prompts are tiny so that a whole run (engine and oracle) takes a
fraction of a second; each hand-made workload is shaped to reach one situation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from specguard.runner.config import EngineConfig
from specguard.runner.engine import Engine, RunResult
from specguard.runner.model import TinyLM
from specguard.runner.oracle import Divergence, first_divergence, greedy_reference
from specguard.runner.workload import Request, constrain

SMALL = EngineConfig(mtp_k=3, block_size=16, num_blocks=64, max_num_seqs=8,
                     max_num_batched_tokens=64)
MODEL = TinyLM(SMALL.model)


def config(**changes: object) -> EngineConfig:
    """The small engine config with some settings changed."""
    return dataclasses.replace(SMALL, **changes)  # type: ignore[arg-type]


def requests_of(lengths: Sequence[int], *, max_tokens: int = 16, seed: int = 0) -> list[Request]:
    """One request per prompt length, random prompt tokens, ids 0, 1, 2, ..."""
    rng = np.random.default_rng(seed)
    vocab = SMALL.model.vocab_size
    return [Request(i, rng.integers(0, vocab, n).astype(np.int64), max_tokens)
            for i, n in enumerate(lengths)]


def chunk_boundary() -> tuple[EngineConfig, list[Request]]:
    """Three short prompts and one of 130 tokens under a 64-token budget.

    Step 1 prefills the short ones and 4 tokens of the long one, which then stays at
    the head of ``running``; step 2 gives it the whole budget; step 3 its last 62 tokens,
    leaving 2 tokens, too few for any decode span. So step 4's decode batch is seq 3 (its
    prefill just ended: no drafts on the host yet) followed by seqs 0-2, which missed the
    previous step and are served from the host.
    """
    return SMALL, requests_of([20, 20, 20, 130])


def constrained_prefills() -> tuple[EngineConfig, list[Request]]:
    """:func:`chunk_boundary`'s requests, each banning half of the vocabulary (a draw of
    its own): step 1 samples the three short prompts' first tokens in one batch, each
    request under its own bans."""
    cfg, requests = chunk_boundary()
    return cfg, constrain(requests, vocab_size=cfg.model.vocab_size)


def padded_decode() -> tuple[EngineConfig, list[Request]]:
    """Three 20-token prompts: step 1 prefills all 60 tokens, and every later step is a
    decode batch of three spans padded to a captured graph of four, whose four padding
    rows sit where step 1's tokens were in the static slot buffer."""
    return SMALL, requests_of([20, 20, 20])


def short_drafter() -> tuple[EngineConfig, list[Request]]:
    """Three 20-token prompts under a drafter whose context ends at 24 tokens: from the
    second decode step on, no seq fits, and the drafter proposes nothing."""
    return config(drafter_max_model_len=24), requests_of([20, 20, 20])


def memory_pressure() -> tuple[EngineConfig, list[Request]]:
    """Four requests that cannot all hold their KV blocks at once: preemption."""
    return config(num_blocks=14), requests_of([40, 40, 40, 40], max_tokens=40)


def run(cfg: EngineConfig, requests: Sequence[Request],
        fault: str | None = None) -> tuple[Engine, RunResult]:
    """Run an engine on the shared model."""
    engine = Engine(cfg, fault=fault, model=MODEL)
    return engine, engine.generate(requests)


def divergence(result: RunResult, requests: Sequence[Request]) -> Divergence | None:
    """Where the run differs from plain greedy decoding, or None."""
    return first_divergence(greedy_reference(MODEL, requests), result.outputs)


def remote_prefills() -> tuple[EngineConfig, list[Request]]:
    """A P/D decode instance: two requests prefilled here (step 1), then 24 prefilled on
    another instance, each handed over with its prompt's KV, its first token and that
    instance's drafts, needing two tokens: one decode each, most of the run's drafts."""
    local = requests_of([20, 24], max_tokens=12)
    remote = [dataclasses.replace(r, request_id=r.request_id + 2, max_tokens=2,
                                  remote_prefill=True)
              for r in requests_of([18] * 24, seed=1)]
    return config(max_num_seqs=32, max_num_batched_tokens=128), local + remote
