"""install()/uninstall() on a vLLM GPUModelRunner, and the vllm.general_plugins hook.

The runner here is a stand-in with the parameter names of vLLM's own methods (0.11.0,
0.11.1, 0.33.0); it replays recorded traffic from the conformance corpus through them.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from vllm_traffic import scheduler_output

from specguard import contracts
from specguard.adapters import (
    UnsupportedVllm,
    install_vllm,
    uninstall_vllm,
    vllm_installed,
    vllm_plugin,
)
from specguard.adapters.corpus import read_corpus
from specguard.adapters.vllm_install import installation_of

CORPUS = Path(__file__).parents[1] / "conformance" / "corpus" / "vllm"


class _Drafter011:
    """EagleProposer.propose of vLLM 0.11.0 / 0.11.1 (parameter names only)."""

    def __init__(self) -> None:
        self.result: Any = None

    def propose(self, target_token_ids, target_positions, target_hidden_states,
                next_token_ids, last_token_indices, common_attn_metadata,
                sampling_metadata, mm_embed_inputs=None):
        return self.result


class _Drafter033:
    """SpecDecodeBaseProposer.propose of vLLM 0.33.0 (parameter names only)."""

    def __init__(self) -> None:
        self.result: Any = None

    def propose(self, num_speculative_tokens, target_token_ids, target_positions,
                target_hidden_states, next_token_ids, token_indices_to_sample,
                common_attn_metadata, sampling_metadata, mm_embed_inputs=None,
                num_rejected_tokens_gpu=None, slot_mappings=None):
        return self.result


class _Runner:
    """GPUModelRunner's attributes and methods that install() reads and wraps."""

    def __init__(self, *, mtp_k: int, async_scheduling: bool = False,
                 drafter: Any = None) -> None:
        self.speculative_config: SimpleNamespace | None = SimpleNamespace(
            num_speculative_tokens=mtp_k)
        self.model_config = SimpleNamespace(get_vocab_size=lambda: 1000)
        self.scheduler_config = SimpleNamespace(async_scheduling=async_scheduling)
        self.use_async_scheduling = async_scheduling
        self.input_batch = SimpleNamespace(req_ids=[])
        self.drafter = drafter if drafter is not None else _Drafter011()
        self.next_order: list[str] = []
        self.next_sampled: Any = None

    def _update_states(self, scheduler_output):
        self.input_batch.req_ids = list(self.next_order)

    def _sample(self, logits, spec_decode_metadata):
        return SimpleNamespace(sampled_token_ids=self.next_sampled)


def _drive(runner: _Runner, name: str) -> None:
    """Call the runner's methods with one corpus file's traffic, in vLLM's order."""
    pending: dict[str, Any] = {}
    for event in read_corpus(CORPUS / f"{name}.json").events:
        fields = event.values()
        if event.event == "schedule":
            runner.next_order = fields["req_ids"]
            runner._update_states(scheduler_output(fields))
        elif event.event == "verified":
            runner.next_sampled = fields["sampled_token_ids"]
            runner._sample(None, None)
        elif event.event == "drafter_input":
            pending = fields
        elif event.event == "drafted":
            runner.drafter.result = fields["draft_token_ids"]
            meta = SimpleNamespace(query_start_loc=pending["query_start_loc"])
            common = dict(target_positions=pending["target_positions"],
                          target_hidden_states=None, next_token_ids=pending["next_token_ids"],
                          common_attn_metadata=meta, sampling_metadata=None)
            if isinstance(runner.drafter, _Drafter033):
                runner.drafter.propose(
                    pending["num_speculative_tokens"], pending["target_token_ids"],
                    token_indices_to_sample=pending["last_token_indices"], **common)
            else:
                runner.drafter.propose(
                    pending["target_token_ids"],
                    last_token_indices=pending["last_token_indices"], **common)


@pytest.fixture(autouse=True)
def _strict_full():
    """Every value rule runs and raises."""
    with contracts.checking(mode="strict", depth="full"):
        yield


def test_installed_runner_checks_recorded_vllm_traffic_through_its_own_methods():
    """0.11.1 chunked prefill (drafts of a discarded chunk) passes through the wrapped
    _update_states, _sample and drafter.propose; the steps reach the tracker."""
    runner = _Runner(mtp_k=2)
    installation = install_vllm(runner, version="0.11.1")
    seen: list[tuple[str, ...]] = []
    schedule = installation.view.schedule
    installation.view.schedule = lambda *a, **k: seen.append(k["req_ids"]) or schedule(*a, **k)
    _drive(runner, "0.11.1/chunked-prefill")
    assert seen[:3] == [["dec"], ["dec"], ["dec", "long"]] and seen[-1] == []
    assert installation.view.mtp_k == 2 and installation.view.vocab_size == 1000
    assert installation.view.tracker is not None
    assert installation.view.tracker.previous is not None


def test_installed_runner_stops_the_seed_at_the_drafter_naming_the_request():
    """0.11.0's -1 next token for a discarded chunk is SG301 at drafter.propose."""
    runner = _Runner(mtp_k=1)
    install_vllm(runner, version="0.11.0")
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG301 no sentinel reaches an embedding [DrafterInput.input_ids, runner → "
            "drafter]: seq 1 at batch position 1, token 15: request 'chunked': input id is -1")):
        _drive(runner, "0.11.0/discarded-chunk-next-token")


def test_installed_0_33_runner_reads_dynamic_k_and_token_indices_to_sample():
    """0.33's propose(num_speculative_tokens, ..., token_indices_to_sample, ...) and rows
    of width K_t replay clean."""
    runner = _Runner(mtp_k=3, drafter=_Drafter033())
    install_vllm(runner, version="0.33.0")
    _drive(runner, "0.33.0/dynamic-k")
    assert installation_of(runner) is not None


def test_uninstall_restores_the_runner_and_its_drafter():
    """After uninstall (or leaving the with block) the methods are the classes' again."""
    runner = _Runner(mtp_k=2)
    with vllm_installed(runner, version="0.11.1"):
        assert {"_update_states", "_sample"} <= set(vars(runner))
        assert "propose" in vars(runner.drafter)
    assert "_update_states" not in vars(runner) and "propose" not in vars(runner.drafter)
    assert installation_of(runner) is None
    uninstall_vllm(runner)  # a second time: nothing to undo


def test_install_refuses_a_release_it_does_not_know():
    """An unlisted vLLM version is refused, saying how to map it to a known one."""
    with pytest.raises(UnsupportedVllm, match=re.escape(
            "specguard knows the runners of vLLM 0.11.0, 0.11.1, 0.33.0; this is vLLM "
            "0.12.0. If its GPUModelRunner and drafter match one of those, pass "
            "version='<that release>'")):
        install_vllm(_Runner(mtp_k=2), version="0.12.0")


def test_install_refuses_a_method_whose_signature_changed():
    """A drafter.propose with another parameter list than the release's is refused, and
    the runner is left untouched."""
    runner = _Runner(mtp_k=2, drafter=_Drafter033())
    with pytest.raises(UnsupportedVllm, match=re.escape(
            "_Drafter033.propose('num_speculative_tokens', 'target_token_ids', ") + ".*" +
            re.escape("does not start with the parameters of vLLM 0.11.1")):
        install_vllm(runner, version="0.11.1")
    assert "_update_states" not in vars(runner)


def test_install_refuses_model_runner_v2_without_a_speculator_or_of_another_release():
    """Model Runner V2 without a speculator, or read as a release other than 0.33.0, and a
    runner without speculative decoding are refused by name."""
    v2 = type("GPUModelRunner", (), {"__module__": "vllm.v1.worker.gpu.model_runner"})()
    with pytest.raises(UnsupportedVllm, match=re.escape(
            "this Model Runner V2 has no speculator: specguard checks the MTP/EAGLE "
            "boundaries and has nothing to check")):
        install_vllm(v2, version="0.33.0")
    with pytest.raises(UnsupportedVllm, match=re.escape(
            "specguard knows Model Runner V2 of vLLM 0.33.0 only; this is read as vLLM "
            "0.11.1. Check its hand-overs by hand with VllmView.mrv2_input_batch()")):
        install_vllm(v2, version="0.11.1")
    plain = _Runner(mtp_k=2)
    plain.speculative_config = None
    with pytest.raises(UnsupportedVllm, match="this runner has no speculative decoding"):
        install_vllm(plain, version="0.11.1")


def test_install_twice_is_refused():
    """A second install on the same runner is an error, not a double wrap."""
    runner = _Runner(mtp_k=2)
    install_vllm(runner, version="0.11.1")
    with pytest.raises(UnsupportedVllm, match="already installed"):
        install_vllm(runner, version="0.11.1")


def test_plugin_entry_point_is_declared_for_vllm():
    """pip install specguard registers specguard.adapters.vllm_plugin:register."""
    points = importlib.metadata.entry_points(group="vllm.general_plugins")
    assert [p.value for p in points if p.name == "specguard"] == [
        "specguard.adapters.vllm_plugin:register"]


def test_plugin_does_nothing_when_checks_are_off():
    """SPECGUARD_MODE off: no import hook, no class patched."""
    before = list(sys.meta_path)
    with contracts.checking(mode="off"):
        vllm_plugin.register()
    assert sys.meta_path == before


_V1_RUNNER = """
    import sys
    sys.path.insert(0, {tests!r})
    from test_vllm_install import _Runner

    class GPUModelRunner(_Runner):
        pass
"""
_MRV2_RUNNER = """
    import sys
    sys.path.insert(0, {tests!r})
    from test_vllm_mrv2_install import GPUModelRunner as _Mrv2Runner

    class GPUModelRunner(_Mrv2Runner):
        speculative_config = object()
"""


@pytest.mark.parametrize(("module_name", "source", "release"), [
    ("vllm.v1.worker.gpu_model_runner", _V1_RUNNER, "0.11.1"),
    ("vllm.v1.worker.gpu.model_runner", _MRV2_RUNNER, "0.33.0"),
], ids=["v1", "model-runner-v2"])
def test_plugin_patches_the_runner_module_when_vllm_imports_it(
        tmp_path, monkeypatch, module_name, source, release):
    """With checks on, importing vLLM's runner module (V1's, or Model Runner V2's) wraps
    its GPUModelRunner so that each new runner is installed, for the release vLLM reads as."""
    parts = module_name.split(".")
    folder = tmp_path
    for part in parts[:-1]:
        folder = folder / part
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
    (tmp_path / "vllm" / "__init__.py").write_text(f'__version__ = "{release}"\n')
    (folder / f"{parts[-1]}.py").write_text(textwrap.dedent(
        source.format(tests=str(Path(__file__).parent))))
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = {name: module for name, module in sys.modules.items()
             if name == "vllm" or name.startswith("vllm.")}
    for name in saved:
        monkeypatch.delitem(sys.modules, name)
    finders = list(sys.meta_path)
    try:
        vllm_plugin.register()
        vllm_plugin.register()  # vLLM may call it again: still one hook
        assert len(sys.meta_path) == len(finders) + 1
        module: ModuleType = __import__(module_name, fromlist=["GPUModelRunner"])
        runner = module.GPUModelRunner(mtp_k=2)
        installation = installation_of(runner)
        assert installation is not None and installation.version == release
    finally:
        sys.meta_path[:] = finders
        for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
            del sys.modules[name]
        sys.modules.update(saved)


def test_importing_specguard_imports_neither_vllm_nor_the_runner():
    """The plugin module and install() import vLLM only when they run."""
    code = ("import sys, specguard.adapters, specguard.adapters.vllm_plugin; "
            "print(sorted(m for m in sys.modules if m == 'vllm' or m.startswith('vllm.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_plugin_leaves_a_model_runner_v2_stage_without_a_speculator_alone():
    """Under strict, an MRV2 runner of an earlier pipeline stage (no speculator: it neither
    samples nor drafts) is not refused, and nothing is installed on it."""
    from test_vllm_mrv2_install import GPUModelRunner as Mrv2Runner

    runner = Mrv2Runner(mtp_k=2)
    runner.speculative_config = object()  # pyright: ignore[reportAttributeAccessIssue] - vLLM's
    runner.speculator = None
    with contracts.checking(mode="strict"):
        vllm_plugin._install(runner)
    assert installation_of(runner) is None
    with contracts.checking(mode="strict"), pytest.raises(UnsupportedVllm, match="speculator"):
        install_vllm(runner, version="0.33.0")
