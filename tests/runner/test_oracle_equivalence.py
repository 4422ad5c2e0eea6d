"""Greedy speculative decoding reproduces plain greedy decoding, token for token.

Whatever the scheduler does (chunked prompts, many seqs, preemption, deferred and new
rows, any mtp_k), the tokens must equal the oracle's; acceptance only changes how many
steps that takes.
"""

from __future__ import annotations

import os

import pytest
from engine_builders import chunk_boundary, config, divergence, memory_pressure, requests_of, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specguard.runner.workload import synthetic_requests

MTP_KS = [1, 2, 3, 4]
#: Engine runs per randomized test; the long profile digs deeper.
EXAMPLES = 300 if os.environ.get("SPECGUARD_HYPOTHESIS_PROFILE") == "long" else 25


@pytest.mark.parametrize("mtp_k", MTP_KS)
def test_long_chunked_prompts(mtp_k):
    """Prompts several budgets long, chunked across steps, decode exactly like greedy."""
    requests = requests_of([300, 17, 190, 64, 5], max_tokens=24, seed=mtp_k)
    engine, result = run(config(mtp_k=mtp_k), requests)
    assert divergence(result, requests) is None
    assert max(r.prompt_len for r in requests) > 4 * engine.config.max_num_batched_tokens


@pytest.mark.parametrize("mtp_k", MTP_KS)
def test_many_concurrent_requests(mtp_k):
    """Sixteen requests through eight seq slots; decode batches mix deferred and new."""
    requests = synthetic_requests(16, vocab_size=2048, seed=10 + mtp_k, min_prompt=1,
                                  max_prompt=120, max_tokens=20)
    engine, result = run(config(mtp_k=mtp_k, max_num_batched_tokens=48), requests)
    assert divergence(result, requests) is None
    assert engine.runner.deferred_rows > 0 and engine.runner.new_rows > 0


@pytest.mark.parametrize("mtp_k", MTP_KS)
def test_preemption_and_recompute(mtp_k):
    """Seqs preempted and recomputed from their known tokens still decode like greedy."""
    cfg, requests = memory_pressure()
    _, result = run(config(mtp_k=mtp_k, num_blocks=cfg.num_blocks), requests)
    assert divergence(result, requests) is None
    assert result.stats.preemptions > 0


@pytest.mark.parametrize("mtp_k", MTP_KS)
def test_chunk_boundary_layout(mtp_k):
    """The ATOM trigger layout (a just-prefilled seq ahead of new seqs) is handled."""
    _, requests = chunk_boundary()
    _, result = run(config(mtp_k=mtp_k), requests)
    assert divergence(result, requests) is None
    assert result.stats.accepted_drafts > 0


@st.composite
def workloads(draw):
    """An engine config and a small workload, both random."""
    mtp_k = draw(st.integers(1, 4))
    block_size = draw(st.sampled_from([4, 8, 16]))
    cfg = config(
        mtp_k=mtp_k, block_size=block_size,
        num_blocks=draw(st.integers(24, 64)) * 16 // block_size,
        max_num_seqs=draw(st.integers(1, 8)),
        max_num_batched_tokens=draw(st.integers(mtp_k + 1, 96)))
    requests = synthetic_requests(
        draw(st.integers(1, 8)), vocab_size=2048, seed=draw(st.integers(0, 2**16)),
        min_prompt=1, max_prompt=draw(st.sampled_from([8, 60, 200])),
        max_tokens=draw(st.integers(1, 24)))
    return cfg, requests


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(workloads())
def test_random_workloads_match_greedy(workload):
    """Random budgets, caches, seq limits, block sizes, prompts and mtp_k."""
    cfg, requests = workload
    _, result = run(cfg, requests)
    assert divergence(result, requests) is None
    assert all(len(out) == r.max_tokens for r, out in
               zip(requests, (result.outputs[r.request_id] for r in requests), strict=True))
