"""A P/D decode instance: requests prefilled elsewhere arrive with their prompt's KV, their
first token and the prefill instance's drafts, and only decode here."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from engine_builders import MODEL, config, divergence, remote_prefills, requests_of

from specguard import contracts
from specguard.runner import faults
from specguard.runner.engine import Engine
from specguard.runner.workload import synthetic_requests


def _recording(engine: Engine) -> list:
    """Every SchedulerOutput the engine's scheduler hands its runner."""
    built: list = []
    original = engine.scheduler._build

    def build(entries):
        out = original(entries)
        built.append(out)
        return out

    engine.scheduler._build = build  # type: ignore[method-assign]
    return built


def test_remote_requests_only_decode_here_with_the_drafts_handed_over():
    """Greedy's tokens; no remote request is ever a prefill row; each one's first decode
    carries the prefill instance's drafts, marked as handed over, which are accepted as
    often as the local ones; strict contracts at full depth see nothing wrong."""
    cfg, requests = remote_prefills()
    engine = Engine(cfg, model=MODEL)
    batches = _recording(engine)
    with contracts.checking(mode="strict", depth="full"):
        result = engine.generate(requests)
    assert divergence(result, requests) is None and result.stats.violations == 0
    remote = {r.request_id for r in requests if r.remote_prefill}
    marked = set()
    for out in batches:
        prefills = set(out.seq_ids[~out.is_decode].tolist())
        assert not prefills & remote
        if out.drafts_handed_over is not None:
            decode = out.seq_ids[out.is_decode]
            marked |= set(decode[out.drafts_handed_over].tolist())
            assert (out.num_drafts[out.drafts_handed_over] == cfg.mtp_k).all()
    assert marked == remote
    assert result.stats.acceptance_rate > 0.4


def test_lost_drafts_are_stopped_at_the_first_remote_decode_by_default():
    """The fault's zeros in the first remote request's row: SG661 names it, at the
    default settings, in the step that decoded it."""
    cfg, requests = remote_prefills()
    engine = Engine(cfg, fault=faults.REMOTE_DRAFTS_LOST, model=MODEL)
    with contracts.checking(mode="strict"), \
            pytest.raises(contracts.ContractViolation) as caught:
        engine.generate(requests)
    violation = caught.value.violations[0]
    assert (violation.code, violation.seq_id, violation.position) == ("SG661", 2, 2)
    assert "carries 3 real drafts that no drafter of this engine proposed" in violation.reason


def test_a_remote_request_finished_by_its_first_token_never_decodes():
    """A one-token request, or one whose first token is a stop id, is done at hand-over."""
    cfg = config()
    local, remote = requests_of([20, 18], max_tokens=4)
    first = Engine(cfg, model=MODEL).generate([dataclasses.replace(remote, request_id=0)])
    stop = int(first.outputs[0][0])
    requests = [local,
                dataclasses.replace(remote, max_tokens=1, remote_prefill=True),
                dataclasses.replace(remote, request_id=2, stop_token_ids=(stop,),
                                    remote_prefill=True)]
    engine = Engine(cfg, model=MODEL)
    batches = _recording(engine)
    with contracts.checking(mode="strict"):
        result = engine.generate(requests)
    assert divergence(result, requests) is None
    assert result.outputs[1].tolist() == result.outputs[2].tolist() == [stop]
    assert not any({1, 2} & set(out.seq_ids.tolist()) for out in batches)


def test_a_preempted_remote_request_is_recomputed_here():
    """Under memory pressure a remote request loses its blocks and, recomputed from its
    prompt and first token like any preempted seq, still matches greedy."""
    local = requests_of([40, 40], max_tokens=30)
    remote = [dataclasses.replace(r, request_id=r.request_id + 2, max_tokens=30,
                                  remote_prefill=True)
              for r in requests_of([40, 40], seed=1)]
    engine = Engine(config(num_blocks=14), model=MODEL)
    with contracts.checking(mode="strict"):
        result = engine.generate(local + remote)
    assert result.stats.preemptions > 0
    assert divergence(result, local + remote) is None


def test_the_synthetic_workload_prefills_a_share_elsewhere_never_the_first():
    requests = synthetic_requests(40, vocab_size=100, max_prompt=32, remote=0.5)
    flags = np.array([r.remote_prefill for r in requests])
    assert not flags[0] and 10 < flags.sum() < 30
    plain = synthetic_requests(40, vocab_size=100, max_prompt=32)
    assert [r.prompt.tolist() for r in plain] == [r.prompt.tolist() for r in requests]
    with pytest.raises(ValueError, match=re.escape("need 0 <= remote <= 1, got 1.5")):
        synthetic_requests(4, vocab_size=100, remote=1.5)


def test_a_round_that_only_receives_remote_requests_still_runs_a_step():
    """One seq at a time: when the local request finishes, the remote one is received,
    which takes no step here; that round decodes it instead of running nothing (which
    the engine would take for a stall)."""
    local, remote = requests_of([12, 10], max_tokens=5)
    requests = [local, dataclasses.replace(remote, remote_prefill=True)]
    with contracts.checking(mode="strict"):
        result = Engine(config(max_num_seqs=1), model=MODEL).generate(requests)
    assert divergence(result, requests) is None


def test_requests_done_at_admission_after_the_last_local_one_end_the_run():
    """The fuzzer's case: one seq at a time, two tokens a step, and remote one-token
    requests that are done at hand-over. A round that admits only such requests has no
    batch and nothing in flight; it runs on to the next request, and the run ends when
    the last one is done (each raised EngineStalled)."""
    from specguard.runner.config import EngineConfig, ModelConfig
    from specguard.runner.scheduler import Request

    cfg = EngineConfig(mtp_k=1, block_size=1, num_blocks=65, max_num_seqs=1,
                       max_num_batched_tokens=2, device="cpu",
                       model=ModelConfig(vocab_size=61, d_model=32, num_heads=2,
                                         num_layers=1, d_ff=64))
    prompts = ([10, 49, 39, 55, 30], [37, 59, 44, 38], [33, 34, 57], [16, 49])
    requests = [Request(i, np.array(prompt), max_tokens, remote_prefill=i % 2 == 1)
                for i, (prompt, max_tokens) in enumerate(zip(prompts, (3, 1, 1, 1),
                                                             strict=True))]
    with contracts.checking(mode="strict"):
        result = Engine(cfg).generate(requests)
    with contracts.checking(mode="off"):
        unchecked = Engine(cfg).generate(requests)
    assert [len(result.outputs[i]) for i in range(4)] == [3, 1, 1, 1]
    assert all((result.outputs[i] == unchecked.outputs[i]).all() for i in range(4))
