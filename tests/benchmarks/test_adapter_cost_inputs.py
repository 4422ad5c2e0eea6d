"""The engine objects the adapter benchmark times are valid, so it times clean work."""

from __future__ import annotations

import pytest

from specguard import contracts
from specguard.adapters import AtomView, VllmView
from specguard.benchmarks import adapter_costs


@pytest.mark.parametrize("seed", range(8))
def test_atom_benchmark_batch_is_clean_at_full_depth(seed):
    """Every seed's ATOM batch passes every rule, SG111's prompt token included."""
    view = AtomView(mtp_k=adapter_costs.MTP_K, vocab_size=adapter_costs.VOCAB_SIZE,
                    block_size=adapter_costs.BLOCK_SIZE)
    with contracts.checking(mode="strict", depth="full"):
        batch = view(adapter_costs.atom_batch(256, seed=seed))
    assert batch is not None and int(batch.num_decode) == 256


@pytest.mark.parametrize("seed", range(8))
def test_vllm_benchmark_output_is_clean_at_full_depth(seed):
    """Every seed's vLLM SchedulerOutput passes every rule."""
    view = VllmView(mtp_k=adapter_costs.MTP_K, vocab_size=adapter_costs.VOCAB_SIZE)
    with contracts.checking(mode="strict", depth="full"):
        step = view.schedule(adapter_costs.scheduler_output(256, seed=seed))
    assert len(step.req_ids) == 256


def test_benchmark_batch_with_a_prompt_less_decode_seq_is_caught():
    """The check above can fail: a decode context of exactly mtp_k+1 is SG111."""
    batch = adapter_costs.atom_batch(8)
    batch.context_lens[3] = adapter_costs.MTP_K + 1
    view = AtomView(mtp_k=adapter_costs.MTP_K, vocab_size=adapter_costs.VOCAB_SIZE,
                    block_size=adapter_costs.BLOCK_SIZE)
    with contracts.checking(mode="strict", depth="full"), \
            pytest.raises(contracts.ContractViolation, match="SG111"):
        view(batch)


@pytest.mark.parametrize("seed", range(5))
def test_sglang_benchmark_batch_is_clean_at_full_depth(seed):
    """Every seed's SGLang decode batch passes every rule of the worker's entry."""
    from specguard.adapters import SglangV2View

    with contracts.checking(mode="strict", depth="full"):
        SglangV2View(spec_steps=3, vocab_size=adapter_costs.VOCAB_SIZE).schedule(
            adapter_costs.sglang_v2_batch(64, seed=seed))
