"""install()/uninstall() on vLLM Model Runner V2's GPUModelRunner.

The runner is a stand-in whose class lives in MRV2's module and whose methods carry the
parameter names of vLLM 0.33.0's ``prepare_inputs``, ``sample`` and the speculator's
``propose``; it replays recorded MRV2 traffic from the conformance corpus through them.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from vllm_traffic import scheduler_output

from specguard import contracts
from specguard.adapters import UnsupportedEngine, install_vllm, uninstall_vllm
from specguard.adapters.corpus import read_corpus
from specguard.adapters.engines.vllm.install import installation_of

CORPUS = Path(__file__).parents[1] / "conformance" / "corpus" / "vllm-mrv2" / "0.33.0"


class _Speculator:
    """BaseSpeculator.propose of vLLM 0.33.0 (parameter names only)."""

    def __init__(self) -> None:
        self.result: Any = None

    def propose(self, input_batch, attn_metadata, slot_mappings, last_hidden_states,
                aux_hidden_states, num_sampled, num_rejected, last_sampled,
                next_prefill_tokens, temperature, seeds, dp_sync_state=None,
                dummy_run=False, skip_attn_for_dummy_run=False, mm_inputs=None,
                is_profile=False, num_speculative_tokens=None):
        return self.result


class GPUModelRunner:
    """MRV2's GPUModelRunner attributes and methods that install() reads and wraps."""

    def __init__(self, *, mtp_k: int) -> None:
        self.num_speculative_steps = mtp_k
        self.vocab_size = 1000
        self.max_num_reqs = 8
        self.speculator: Any = _Speculator()
        self.adaptive_verification: object | None = None
        self.pcp_manager = None
        self.next_batch: Any = None
        self.next_sampled: Any = None

    def prepare_inputs(self, scheduler_output, batch_req_state, batch_desc, num_active_loras):
        return self.next_batch

    def sample(self, hidden_states, input_batch, grammar_output):
        out = self.next_sampled
        return out, out.num_sampled, out.num_rejected


GPUModelRunner.__module__ = "vllm.v1.worker.gpu.model_runner"


def _drive(runner: GPUModelRunner, scenario: str) -> None:
    """Replay one recorded MRV2 run through the runner's (wrapped) methods."""
    output = None
    for event in read_corpus(CORPUS / f"{scenario}.json").events:
        fields = event.values()
        if event.event == "schedule":
            output = scheduler_output(fields)
        elif event.event == "input_batch":
            runner.next_batch = SimpleNamespace(**fields)
            runner.prepare_inputs(output, None, None, 0)
        elif event.event == "sampled":
            runner.next_sampled = SimpleNamespace(**fields)
            runner.sample(None, runner.next_batch, None)
        elif event.event == "drafted":
            runner.speculator.result = fields["draft_tokens"]
            runner.speculator.propose(
                runner.next_batch, None, None, None, None, None, None, None, None, None,
                None, num_speculative_tokens=fields["num_speculative_tokens"])


def test_install_checks_model_runner_v2_traffic_and_uninstall_restores_it():
    """Installed on an MRV2 runner, valid recorded traffic passes at full depth, the
    over-scheduled drafts raise SG628 for the request, and uninstall removes the wraps."""
    runner = GPUModelRunner(mtp_k=3)
    installation = install_vllm(runner, version="0.33.0")
    assert installation_of(runner) is installation
    assert installation.view.mtp_k == 3 and installation.view.tracker is None
    with contracts.checking(mode="strict", depth="full"):
        _drive(runner, "dynamic-k")
        with pytest.raises(contracts.ContractViolation, match=re.escape(
                "request 'r1': input id is -1")):
            _drive(runner, "over-scheduled-drafts")
    uninstall_vllm(runner)
    assert not {"prepare_inputs", "sample"} & set(vars(runner))
    assert "propose" not in vars(runner.speculator)


def test_install_on_model_runner_v2_skips_adaptive_verification_steps():
    """Adaptive verification (counts are upper bounds, spans live on the device) is not
    covered: its steps are not checked, not falsely flagged."""
    runner = GPUModelRunner(mtp_k=3)
    install_vllm(runner, version="0.33.0")
    runner.adaptive_verification = object()
    with contracts.checking(mode="strict", depth="full"):
        _drive(runner, "over-scheduled-drafts")


def test_install_refuses_a_model_runner_v2_speculator_of_another_signature():
    """A speculator whose propose() takes no input_batch is refused, naming what it lacks,
    and the runner is left untouched."""
    runner = GPUModelRunner(mtp_k=3)
    runner.speculator = SimpleNamespace(propose=lambda drafts, k: None)
    with pytest.raises(UnsupportedEngine, match=re.escape(
            "SimpleNamespace.propose(drafts, k) lacks input_batch: specguard reads those "
            "arguments by name, and this build (read as vLLM 0.33.0) has another shape")):
        install_vllm(runner, version="0.33.0")
    assert "prepare_inputs" not in vars(runner)


def test_install_checks_sample_and_propose_only_for_the_steps_own_input_batch():
    """sample() and speculator.propose() handed the step's InputBatch are checked (a -1
    among the K_t drafts is SG631); a dummy batch handed to them is not."""
    runner = GPUModelRunner(mtp_k=3)
    install_vllm(runner, version="0.33.0")
    events = [e.values() for e in read_corpus(CORPUS / "steady-decode.json").events]
    schedule, batch, sampled, drafted = events[4:8]
    assert [e["step"] for e in (schedule, batch, sampled, drafted)] == [1, 1, 1, 1]
    runner.next_batch = SimpleNamespace(**batch)
    dummy = SimpleNamespace(**batch)
    bad = drafted["draft_tokens"].copy()
    bad[1, 0] = -1
    runner.speculator.result = bad
    with contracts.checking(mode="strict", depth="full"):
        runner.prepare_inputs(scheduler_output(schedule), None, None, 0)
        runner.next_sampled = SimpleNamespace(**sampled)
        runner.sample(None, runner.next_batch, None)
        runner.speculator.propose(dummy, None, None, None, None, None, None, None, None,
                                  None, None, num_speculative_tokens=3)
        with pytest.raises(contracts.ContractViolation, match=re.escape(
                "SG631 the drafts the next step may read are in the vocabulary")) as caught:
            runner.speculator.propose(runner.next_batch, None, None, None, None, None, None,
                                      None, None, None, None, num_speculative_tokens=3)
    assert (caught.value.violations[0].position,
            caught.value.violations[0].reason) == (1, "request 'r1': draft 0 is -1")
