"""install()/uninstall() on a vLLM GPUModelRunner, and the vllm.general_plugins hook.

The runner here is a stand-in with the parameter names of vLLM's own methods (0.11.0,
0.11.1, 0.33.0); it replays recorded traffic from the conformance corpus through them.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from vllm_traffic import scheduler_output

from specguard import contracts
from specguard.adapters import (
    UnsupportedEngine,
    VllmView,
    install_vllm,
    uninstall_vllm,
    vllm_installed,
)
from specguard.adapters.corpus import read_corpus
from specguard.adapters.engines.vllm import plugin as vllm_plugin
from specguard.adapters.engines.vllm.install import installation_of

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
    view = installation.view
    assert isinstance(view, VllmView)
    schedule = view.schedule
    setattr(view, "schedule",  # noqa: B010  (a method replaced on the instance)
            lambda *a, **k: seen.append(k["req_ids"]) or schedule(*a, **k))
    _drive(runner, "0.11.1/chunked-prefill")
    assert seen[:3] == [["dec"], ["dec"], ["dec", "long"]] and seen[-1] == []
    assert installation.view.mtp_k == 2 and installation.view.vocab_size == 1000
    assert installation.view.tracker is not None
    assert installation.view.tracker.previous is not None


def test_install_without_a_tracker_gives_the_view_none():
    """tracker=False builds the same view without a step tracker; the traffic passes."""
    runner = _Runner(mtp_k=2)
    installation = install_vllm(runner, version="0.11.1", tracker=False)
    assert isinstance(installation.view, VllmView) and installation.view.tracker is None
    _drive(runner, "0.11.1/chunked-prefill")


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


def test_install_reads_an_unlisted_release_by_what_its_code_has():
    """No version list: a release between the recorded ones installs when its methods
    have what specguard reads, and the view follows the drafter's own parameters."""
    old = install_vllm(_Runner(mtp_k=2), version="0.12.0")
    assert (old.shape.sample_index, old.shape.dynamic_k) == ("last_token_indices", False)
    new = install_vllm(_Runner(mtp_k=2, drafter=_Drafter033()), version="0.24.0")
    assert (new.shape.sample_index, new.shape.dynamic_k) == ("token_indices_to_sample", True)
    # No _preprocess to read here: the release decides, and the shape says so.
    assert isinstance(new.view, VllmView)
    assert new.shape.masks_placeholders is False and not new.view.masks_placeholders
    assert new.shape.masking_from == ("release 0.24.0 < 0.25.0 (the runner's source could "
                                      "not be read)")
    later = install_vllm(_Runner(mtp_k=2, drafter=_Drafter033()), version="0.29.0")
    assert later.shape.masks_placeholders is True
    assert later.shape.masking_from == ("release 0.29.0 >= 0.25.0 (the runner's source could "
                                        "not be read)")


def test_install_refuses_a_drafter_that_lacks_what_specguard_reads():
    """A propose() without EAGLE's arguments is refused in one line naming what it lacks,
    and the runner is left untouched."""

    class Odd:
        def propose(self, target_token_ids, next_token_ids, last_token_indices):
            return None

    runner = _Runner(mtp_k=2, drafter=Odd())
    with pytest.raises(UnsupportedEngine, match=re.escape(
            "Odd.propose(target_token_ids, next_token_ids, last_token_indices) lacks "
            "target_positions, common_attn_metadata: specguard reads those arguments by "
            "name, and this build (read as vLLM 0.11.1) has another shape")):
        install_vllm(runner, version="0.11.1")
    assert "_update_states" not in vars(runner)

    class Unindexed:
        def propose(self, target_token_ids, target_positions, next_token_ids,
                    common_attn_metadata):
            return None

    with pytest.raises(UnsupportedEngine, match=re.escape(
            "Unindexed.propose(target_token_ids, target_positions, next_token_ids, "
            "common_attn_metadata) names none of token_indices_to_sample, "
            "last_token_indices")):
        install_vllm(_Runner(mtp_k=2, drafter=Unindexed()), version="0.11.1")


def test_install_refuses_model_runner_v2_without_a_speculator_and_a_runner_without_drafts():
    """Model Runner V2 without a speculator and a runner without speculative decoding are
    refused by name."""
    v2 = type("GPUModelRunner", (), {"__module__": "vllm.v1.worker.gpu.model_runner"})()
    with pytest.raises(UnsupportedEngine, match=re.escape(
            "this Model Runner V2 has no speculator: specguard checks the MTP/EAGLE "
            "boundaries and has nothing to check")):
        install_vllm(v2, version="0.33.0")
    plain = _Runner(mtp_k=2)
    plain.speculative_config = None
    with pytest.raises(UnsupportedEngine, match="this runner has no speculative decoding"):
        install_vllm(plain, version="0.11.1")


def test_install_twice_is_refused():
    """A second install on the same runner is an error, not a double wrap."""
    runner = _Runner(mtp_k=2)
    install_vllm(runner, version="0.11.1")
    with pytest.raises(UnsupportedEngine, match="already installed"):
        install_vllm(runner, version="0.11.1")


def test_plugin_entry_point_is_declared_for_vllm():
    """pip install specguard registers specguard.adapters.engines.vllm.plugin:register."""
    points = importlib.metadata.entry_points(group="vllm.general_plugins")
    assert [p.value for p in points if p.name == "specguard"] == [
        "specguard.adapters.engines.vllm.plugin:register"]


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
_V1_ODD_RUNNER = """
    import sys
    sys.path.insert(0, {tests!r})
    from test_vllm_install import _Runner

    class _OddDrafter:
        def propose(self, target_token_ids):
            return None

    class GPUModelRunner(_Runner):
        def __init__(self, **options):
            super().__init__(drafter=_OddDrafter(), **options)
"""
_MRV2_RUNNER = """
    import sys
    sys.path.insert(0, {tests!r})
    from test_vllm_mrv2_install import GPUModelRunner as _Mrv2Runner

    class GPUModelRunner(_Mrv2Runner):
        speculative_config = object()
"""


def _fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module_name: str, source: str,
               version: str) -> dict[str, ModuleType]:
    """A ``vllm`` package on sys.path with one runner module; returns the vllm modules it
    hid from sys.modules."""
    parts = module_name.split(".")
    folder = tmp_path
    for part in parts[:-1]:
        folder = folder / part
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
    (tmp_path / "vllm" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (folder / f"{parts[-1]}.py").write_text(textwrap.dedent(
        source.format(tests=str(Path(__file__).parent))))
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = {name: module for name, module in sys.modules.items()
             if name == "vllm" or name.startswith("vllm.")}
    for name in saved:
        monkeypatch.delitem(sys.modules, name)
    return saved


def _forget_vllm(saved: dict[str, ModuleType], finders: list[Any]) -> None:
    sys.meta_path[:] = finders
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]
    sys.modules.update(saved)


@pytest.mark.parametrize("unset", ["", "  ", None])
def test_plugin_is_inert_unless_specguard_mode_is_set(tmp_path, monkeypatch, unset):
    """SPECGUARD_MODE unset (specguard's own default mode is strict): the plugin wraps
    nothing, and a runner of a build specguard does not know starts unchecked."""
    if unset is None:
        monkeypatch.delenv("SPECGUARD_MODE", raising=False)
    else:
        monkeypatch.setenv("SPECGUARD_MODE", unset)
    saved = _fake_vllm(tmp_path, monkeypatch, "vllm.v1.worker.gpu_model_runner", _V1_RUNNER,
                       "9.9.9")
    finders = list(sys.meta_path)
    try:
        with contracts.checking(mode="strict"):
            vllm_plugin.register()
            assert not vllm_plugin.requested()
            assert sys.meta_path == finders
            module: Any = __import__("vllm.v1.worker.gpu_model_runner",
                                     fromlist=["GPUModelRunner"])
            runner = module.GPUModelRunner(mtp_k=2)  # an unknown release: no refusal
        assert installation_of(runner) is None
    finally:
        _forget_vllm(saved, finders)


def test_plugin_acts_in_the_mode_set(tmp_path, monkeypatch, caplog):
    """SPECGUARD_MODE=warn: the plugin installs, and a build of an unknown shape is logged,
    not raised."""
    monkeypatch.setenv("SPECGUARD_MODE", "warn")
    monkeypatch.delenv("SPECGUARD_VLLM_VERSION", raising=False)
    saved = _fake_vllm(tmp_path, monkeypatch, "vllm.v1.worker.gpu_model_runner",
                       _V1_ODD_RUNNER, "9.9.9")
    finders = list(sys.meta_path)
    try:
        with contracts.checking(mode="warn"), caplog.at_level("WARNING", "specguard"):
            vllm_plugin.register()
            assert vllm_plugin.requested()
            module: Any = __import__("vllm.v1.worker.gpu_model_runner",
                                     fromlist=["GPUModelRunner"])
            runner = module.GPUModelRunner(mtp_k=2)
        assert installation_of(runner) is None
        assert ("specguard: not checking this vLLM runner: _OddDrafter.propose(target_token_ids) "
                "lacks target_positions") in caplog.text
    finally:
        _forget_vllm(saved, finders)


@pytest.mark.parametrize(("reported", "override", "release"), [
    ("0.11.1.dev42+gabc1234", None, "0.11.1"),
    ("0.11.1rc1", None, "0.11.1"),
    ("0.11.1+cu130", None, "0.11.1"),
    ("1.2.3.dev0+fork", "0.11.1", "0.11.1"),
    ("garbage", "0.11.1.dev7", "0.11.1"),
])
def test_plugin_reads_dev_rc_local_builds_and_the_override_as_their_release(
        tmp_path, monkeypatch, reported, override, release):
    monkeypatch.setenv("SPECGUARD_MODE", "strict")
    if override is None:
        monkeypatch.delenv("SPECGUARD_VLLM_VERSION", raising=False)
    else:
        monkeypatch.setenv("SPECGUARD_VLLM_VERSION", override)
    saved = _fake_vllm(tmp_path, monkeypatch, "vllm.v1.worker.gpu_model_runner", _V1_RUNNER,
                       reported)
    finders = list(sys.meta_path)
    try:
        with contracts.checking(mode="strict"):
            vllm_plugin.register()
            module: Any = __import__("vllm.v1.worker.gpu_model_runner",
                                     fromlist=["GPUModelRunner"])
            runner = module.GPUModelRunner(mtp_k=2)
        installation = installation_of(runner)
        assert installation is not None and installation.version == release
    finally:
        _forget_vllm(saved, finders)


@pytest.mark.parametrize("value", ["latest", "0.x.1", "0.11.1 junk", "011"])
def test_a_bad_vllm_version_override_is_a_config_error_at_start_up(monkeypatch, value):
    monkeypatch.setenv("SPECGUARD_MODE", "strict")
    monkeypatch.setenv("SPECGUARD_VLLM_VERSION", value)
    finders = list(sys.meta_path)
    try:
        with contracts.checking(mode="strict"), pytest.raises(
                contracts.ConfigError, match=re.escape(
                    f"SPECGUARD_VLLM_VERSION: {value!r} is not a vLLM version (expected "
                    "X.Y.Z, optionally with rc, dev, post or +local parts)")):
            vllm_plugin.register()
    finally:
        sys.meta_path[:] = finders


@pytest.mark.parametrize(("module_name", "source", "release"), [
    ("vllm.v1.worker.gpu_model_runner", _V1_RUNNER, "0.11.1"),
    ("vllm.v1.worker.gpu.model_runner", _MRV2_RUNNER, "0.33.0"),
], ids=["v1", "model-runner-v2"])
def test_plugin_patches_the_runner_module_when_vllm_imports_it(
        tmp_path, monkeypatch, module_name, source, release):
    """With checks on, importing vLLM's runner module (V1's, or Model Runner V2's) wraps
    its GPUModelRunner so that each new runner is installed, for the release vLLM reads as."""
    monkeypatch.setenv("SPECGUARD_MODE", "strict")
    monkeypatch.delenv("SPECGUARD_VLLM_VERSION", raising=False)
    saved = _fake_vllm(tmp_path, monkeypatch, module_name, source, release)
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
        _forget_vllm(saved, finders)


def test_importing_specguard_imports_neither_vllm_nor_the_runner():
    """The plugin module and install() import vLLM only when they run."""
    code = ("import sys, specguard.adapters, specguard.adapters.engines.vllm.plugin; "
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
    with contracts.checking(mode="strict"), pytest.raises(UnsupportedEngine, match="speculator"):
        install_vllm(runner, version="0.33.0")


class _SlottedDrafter:
    """A drafter with __slots__ and no __dict__: no wrapper can be put on the object."""

    __slots__ = ("result",)

    def __init__(self) -> None:
        self.result: Any = None

    def propose(self, target_token_ids, target_positions, target_hidden_states,
                next_token_ids, last_token_indices, common_attn_metadata,
                sampling_metadata, mm_embed_inputs=None):
        return self.result


def test_install_is_all_or_nothing_on_a_drafter_that_cannot_hold_a_wrapper():
    """Every method is checked before the first is wrapped: the runner is left untouched,
    with no half installation, and the error is the engines' common one."""
    runner = _Runner(mtp_k=2, drafter=_SlottedDrafter())
    with pytest.raises(UnsupportedEngine, match=re.escape(
            "_SlottedDrafter keeps no attributes of its own (it has __slots__ and no __dict__), "
            "so specguard cannot put its check on _SlottedDrafter.propose() without changing "
            "the class")):
        install_vllm(runner, version="0.11.1")
    assert {"_update_states", "_sample"}.isdisjoint(vars(runner))
    assert installation_of(runner) is None
    uninstall_vllm(runner)  # nothing to undo, nothing raised
    install_vllm(_Runner(mtp_k=2), version="0.11.1")  # the ordinary drafter still installs


@pytest.mark.parametrize("value", [None, True, 0, 2.0, "3"])
def test_a_speculative_config_without_a_count_is_refused_naming_the_field(value):
    runner = _Runner(mtp_k=2)
    spec = runner.speculative_config
    assert spec is not None
    spec.num_speculative_tokens = value
    with pytest.raises(UnsupportedEngine, match=re.escape(
            f"speculative_config.num_speculative_tokens is {value!r}: specguard needs an "
            "integer >= 1 there")):
        install_vllm(runner, version="0.11.1")
    assert installation_of(runner) is None and "_sample" not in vars(runner)


def test_wrapped_methods_keep_their_signatures():
    runner = _Runner(mtp_k=2)
    before = {name: inspect.signature(getattr(runner, name))
              for name in ("_update_states", "_sample")}
    propose = inspect.signature(runner.drafter.propose)
    with vllm_installed(runner, version="0.11.1"):
        assert "_sample" in vars(runner)
        assert {name: inspect.signature(getattr(runner, name)) for name in before} == before
        assert inspect.signature(runner.drafter.propose) == propose
        assert runner._sample.__name__ == "_sample"


class _GrammarRunner(_Runner):
    """A 0.11.1-on runner: execute_model leaves its logits for sample_tokens, which
    applies the structured-output bitmask."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.execute_model_state: Any = None
        self.applied: list[Any] = []

    def sample_tokens(self, grammar_output):
        self.applied.append(grammar_output)
        return None


def _grammar_step(rows: int, logits: int):
    """Request a verifies 2 drafts, b is a prefill; a follows a grammar with ``rows``."""
    from vllm_engine import scheduler_output as output_of

    runner = _GrammarRunner(mtp_k=2)
    install_vllm(runner, version="0.11.1")
    runner.next_order = ["a", "b"]
    runner._update_states(output_of({"a": [5, 6]}, {"b": 7}))
    runner.execute_model_state = (None, np.zeros((logits, 8)), None)
    grammar = SimpleNamespace(structured_output_request_ids=["a"],
                              grammar_bitmask=np.zeros((rows, 4), dtype=np.int32))
    runner.sample_tokens(grammar)
    return runner


def test_installed_runner_checks_the_grammar_bitmask_before_sample_tokens_applies_it():
    """sample_tokens is wrapped where the runner has it: a bitmask with a's 1 + 2 rows
    passes at the default depth; one short of them is SG312, before the runner applies
    it. The logits' rows are read off execute_model_state."""
    with contracts.checking(mode="strict", depth="essential"):
        assert len(_grammar_step(rows=3, logits=4).applied) == 1
        with pytest.raises(contracts.ContractViolation, match=re.escape(
                "request 'a': its rows 0..3 run past the 2 rows of the data")):
            _grammar_step(rows=2, logits=4)
        with pytest.raises(contracts.ContractViolation, match="SG311"):
            _grammar_step(rows=3, logits=5)  # logits of another layout than the runner's


def test_a_runner_without_sample_tokens_installs_without_it():
    """0.11.0 applies the bitmask inside execute_model: nothing more is wrapped."""
    runner = _Runner(mtp_k=2)
    install_vllm(runner, version="0.11.0")
    assert "sample_tokens" not in vars(runner)
    grammar_runner = _GrammarRunner(mtp_k=2)
    install_vllm(grammar_runner, version="0.11.1")
    assert "sample_tokens" in vars(grammar_runner)
    uninstall_vllm(grammar_runner)
    assert "sample_tokens" not in vars(grammar_runner)
