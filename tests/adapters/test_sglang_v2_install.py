"""The SGLang 0.5.23 installer and plugin on workers with 0.5.23's method signatures
(``tests/adapters/data/sglang_0.5.23_signatures.json``, read from the wheel with ast),
driven by the recorded corpus: valid runs pass, buggy runs raise their rule from the
wrapped method, and a worker of another shape is refused before anything is wrapped."""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import logging
import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from sglang_v2_traffic import batch as _batch
from sglang_v2_traffic import result as _result

from specguard import contracts
from specguard.adapters import UnsupportedEngine
from specguard.adapters.corpus import read_corpus
from specguard.adapters.engines.sglang.v2 import install as sglang_install
from specguard.adapters.engines.sglang.v2 import plugin

DATA = json.loads((Path(__file__).parent / "data" / "sglang_0.5.23_signatures.json")
                  .read_text(encoding="utf-8"))
METHODS = DATA["methods"]
CORPUS = Path(__file__).parents[1] / "conformance" / "corpus" / "sglang" / "0.5.23"


class _Script:
    """A recorded run, one step at a time: what the worker's methods return."""

    def __init__(self, scenario: str) -> None:
        self.corpus = read_corpus(CORPUS / f"{scenario}.json")
        self.steps: list[dict[str, dict[str, Any]]] = []
        for event in self.corpus.events:
            if event.event == "forward":
                self.steps.append({})
            self.steps[-1][event.event] = event.values()

    def batches(self) -> list[tuple[Any, dict[str, dict[str, Any]]]]:
        return [(_batch(step["forward"]), step) for step in self.steps]


class EagleDraftWorker:
    def __init__(self) -> None:
        self.step: dict[str, dict[str, Any]] = {}

    def draft(self, batch: Any, *, with_topology: bool = False) -> Any:
        return SimpleNamespace(**self.step["verify_input"])


class EAGLEWorkerV2:
    """0.5.23's overlap worker as the installer meets it, replaying recorded steps."""

    def __init__(self, server_args: Any = None, gpu_id: int = 0, nccl_port: int = 0,
                 target_worker: Any = None, *, topk: int = 1, steps: int = 3) -> None:
        self.topk = topk
        self.speculative_num_steps = steps
        self.speculative_num_draft_tokens = steps + 1
        self.adaptive_controller = None
        self._target_worker = target_worker or SimpleNamespace(
            model_config=SimpleNamespace(vocab_size=1000))
        self._draft_worker: EagleDraftWorker | None = EagleDraftWorker()
        self.step: dict[str, dict[str, Any]] = {}

    @property
    def draft_worker(self) -> Any:
        return self._draft_worker

    @property
    def target_worker(self) -> Any:
        return self._target_worker

    def forward_batch_generation(self, batch: Any, on_publish: Any = None,
                                 grammar_barrier: Any = None,
                                 pp_proxy_tensors: Any = None) -> Any:
        drafted = SimpleNamespace(**self.step["drafted"])
        if "verify_input" not in self.step:
            return SimpleNamespace(next_draft_input=drafted)
        assert self._draft_worker is not None
        self._draft_worker.step = self.step
        self._draft_worker.draft(batch)
        result = self.verify(batch, grammar_barrier=grammar_barrier)
        result.next_draft_input.topk_index = drafted.topk_index
        return result

    def verify(self, batch: Any, pp_proxy_tensors: Any = None,
               grammar_barrier: Any = None) -> Any:
        return _result(self.step["verified"])


def _parameters(method: Any) -> list[str]:
    names = []
    for p in list(inspect.signature(method).parameters.values())[1:]:
        names.append({p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name)
    return names


@pytest.mark.parametrize("qualified, method", [
    ("EAGLEWorkerV2.forward_batch_generation", EAGLEWorkerV2.forward_batch_generation),
    ("EAGLEWorkerV2.verify", EAGLEWorkerV2.verify),
    ("EagleDraftWorker.draft", EagleDraftWorker.draft),
])
def test_the_stand_in_worker_has_the_recorded_signatures(qualified, method):
    assert _parameters(method) == METHODS[qualified]
    assert set(sglang_install.METHODS[qualified]) <= set(METHODS[qualified])


def test_the_attributes_the_installer_reads_are_assigned_by_0_5_23():
    assert {"topk", "speculative_num_steps", "speculative_num_draft_tokens",
            "adaptive_controller"} <= set(METHODS["EAGLEWorkerV2.__init__ assigns"])
    assert METHODS["BaseSpecWorker.draft_worker"] == []  # properties: no parameters
    assert METHODS["HookType"] == ["BEFORE", "AFTER", "AROUND", "REPLACE"]
    assert METHODS["HookRegistry.register"][:3] == ["target", "hook", "hook_type"]


def _drive(worker: EAGLEWorkerV2, scenario: str, *, depth: str = "full") -> None:
    with contracts.checking(mode="strict", depth=depth):
        for batch, step in _Script(scenario).batches():
            worker.step = step
            worker.forward_batch_generation(batch, on_publish=None)


@pytest.mark.parametrize("scenario", ["mixed-prompt-lengths", "join-running-batch",
                                      "retract-and-reprefill", "bs9"])
def test_installed_worker_runs_the_recorded_traffic_clean(scenario):
    worker = EAGLEWorkerV2()
    installation = sglang_install.install(worker)
    _drive(worker, scenario)
    assert sglang_install.installation_of(worker) is installation
    assert installation.view.tracker is not None and installation.view.tracker.previous


@pytest.mark.parametrize("scenario, code, method", [
    ("sg658-bonus-token-wrong-stride", "SG658", "verify"),
    ("sg650-filter-truncates-relay-rows", "SG650", "forward_batch_generation"),
    ("sg651-pad-sentinel-in-prefill", "SG651", "forward_batch_generation"),
])
def test_installed_worker_raises_the_bug_from_the_wrapped_method(scenario, code, method):
    worker = EAGLEWorkerV2()
    sglang_install.install(worker)
    with pytest.raises(contracts.ContractViolation) as raised:
        _drive(worker, scenario, depth="essential")
    assert raised.value.violations[0].code == code
    assert method in {frame.name for frame in raised.traceback}


def test_uninstall_puts_every_method_back():
    worker = EAGLEWorkerV2()
    draft_worker = worker.draft_worker
    with sglang_install.installed(worker):
        assert "verify" in vars(worker) and "draft" in vars(draft_worker)
    assert "verify" not in vars(worker) and "forward_batch_generation" not in vars(worker)
    assert "draft" not in vars(draft_worker)
    assert sglang_install.installation_of(worker) is None
    sglang_install.uninstall(worker)  # a worker without it is left as it is


def _renamed(worker: EAGLEWorkerV2) -> None:
    def verify(schedule_batch: Any, grammar_barrier: Any = None) -> Any:
        return None

    worker.verify = verify  # type: ignore[method-assign]


@pytest.mark.parametrize("change, message", [
    (_renamed, "EAGLEWorkerV2.verify() has no parameter batch"),
    (lambda w: setattr(w, "topk", 2), "topk is 2: specguard checks MTP"),
    (lambda w: setattr(w, "adaptive_controller", object()), "runs adaptive speculation"),
    (lambda w: setattr(w, "speculative_num_draft_tokens", 6),
     "speculative_num_draft_tokens is 6 for 3 steps"),
    (lambda w: setattr(w, "_draft_worker", None), "hosts no draft worker"),
    (lambda w: setattr(w, "_target_worker", SimpleNamespace(model_config=None)),
     "target_worker.model_config.vocab_size is None"),
    (lambda w: setattr(w, "speculative_num_steps", True),
     "speculative_num_steps is True"),
])
def test_a_worker_of_another_shape_is_refused_and_left_untouched(change, message):
    worker = EAGLEWorkerV2()
    change(worker)
    before = dict(vars(worker))
    with pytest.raises(UnsupportedEngine, match=re.escape(message)):
        sglang_install.install(worker)
    assert vars(worker) == before
    draft_worker = worker.draft_worker
    assert draft_worker is None or "draft" not in vars(draft_worker)


def _of_0_5_16() -> EAGLEWorkerV2:
    """0.5.16's overlap worker: ``forward_batch_generation(batch, on_publish)``, no
    grammar barrier (read off its wheel), which specguard does not read."""
    worker = EAGLEWorkerV2()
    full = worker.forward_batch_generation

    def forward_batch_generation(batch: Any, on_publish: Any = None) -> Any:
        return full(batch, on_publish)

    worker.forward_batch_generation = forward_batch_generation  # type: ignore[method-assign]
    return worker


def test_a_release_without_a_parameter_specguard_does_not_read_installs_and_checks():
    worker = _of_0_5_16()
    sglang_install.install(worker)
    _drive(worker, "join-running-batch")  # clean traffic: no violation
    worker = _of_0_5_16()
    sglang_install.install(worker)
    with pytest.raises(contracts.ContractViolation) as raised:
        _drive(worker, "sg658-bonus-token-wrong-stride", depth="essential")
    assert raised.value.violations[0].code == "SG658"


def _without_batch(worker: EAGLEWorkerV2) -> None:
    def forward_batch_generation(schedule_batch: Any, on_publish: Any = None) -> Any:
        return None

    worker.forward_batch_generation = forward_batch_generation  # type: ignore[method-assign]


def test_a_forward_without_the_batch_it_reads_is_refused_naming_it():
    worker = EAGLEWorkerV2()
    _without_batch(worker)
    with pytest.raises(UnsupportedEngine) as refused:
        sglang_install.install(worker)
    assert str(refused.value) == (
        "EAGLEWorkerV2.forward_batch_generation() has no parameter batch, which specguard "
        "reads (forward_batch_generation(schedule_batch, on_publish))")


def test_a_second_install_is_refused():
    worker = EAGLEWorkerV2()
    sglang_install.install(worker)
    with pytest.raises(UnsupportedEngine, match="already installed"):
        sglang_install.install(worker)


def test_draft_and_verify_of_another_batch_are_not_read():
    """A draft or verify call handed another batch (a warm-up, a dummy run) is not taken
    as the step's: the recorded buggy verify result is then not checked."""
    worker = EAGLEWorkerV2()
    sglang_install.install(worker)
    script = _Script("sg658-bonus-token-wrong-stride")
    batch, step = script.batches()[1]
    worker.step = step
    with contracts.checking(mode="strict", depth="essential"):
        worker.verify(SimpleNamespace())  # no step in flight
        with pytest.raises(contracts.ContractViolation, match="SG658"):
            worker.forward_batch_generation(batch)


# --- the plugin -------------------------------------------------------------------------

def test_plugin_entry_point_is_declared_for_sglang():
    points = importlib.metadata.entry_points(group="sglang.srt.plugins")
    assert [p.value for p in points if p.name == "specguard"] == [
        "specguard.adapters.engines.sglang.v2.plugin:register"]


_HOOK_REGISTRY = '''
    import enum, functools, importlib

    class HookType(enum.Enum):
        BEFORE = "before"
        AFTER = "after"
        AROUND = "around"
        REPLACE = "replace"

    class HookRegistry:
        """SGLang 0.5.23's registry as plugins meet it: register, then apply_hooks."""
        _hooks = []

        @classmethod
        def register(cls, target, hook, hook_type=HookType.AFTER, *, source=None):
            cls._hooks.append((target, hook, hook_type))

        @classmethod
        def apply_hooks(cls):
            for target, hook, hook_type in cls._hooks:
                module, owner, name = target.rsplit(".", 2)
                owner = getattr(importlib.import_module(module), owner)
                original = getattr(owner, name)
                assert hook_type is HookType.AFTER

                @functools.wraps(original)
                def wrapper(*args, __original=original, __hook=hook, **kwargs):
                    result = __original(*args, **kwargs)
                    modified = __hook(result, *args, **kwargs)
                    return modified if modified is not None else result

                setattr(owner, name, wrapper)
'''
_WORKER_MODULE = '''
    import sys
    sys.path.insert(0, {tests!r})
    from test_sglang_v2_install import EAGLEWorkerV2 as _Worker

    class EAGLEWorkerV2(_Worker):
        pass
'''


def _fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """An ``sglang`` package with 0.5.23's plugin registry and a worker module; returns
    the registry module."""
    for folder in ("sglang", "sglang/srt", "sglang/srt/plugins", "sglang/srt/speculative"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "sglang/srt/plugins/hook_registry.py").write_text(
        textwrap.dedent(_HOOK_REGISTRY))
    (tmp_path / "sglang/srt/speculative/eagle_worker_v2.py").write_text(
        textwrap.dedent(_WORKER_MODULE.format(tests=str(Path(__file__).parent))))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(plugin, "_registered", [])
    import sglang.srt.plugins.hook_registry as registry  # pyright: ignore[reportMissingImports]

    return registry


@pytest.fixture
def fake_sglang(tmp_path, monkeypatch):
    registry = _fake_sglang(tmp_path, monkeypatch)
    yield registry
    for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
        del sys.modules[name]


@pytest.mark.parametrize("unset", ["", "  ", None])
def test_plugin_is_inert_unless_specguard_mode_is_set(fake_sglang, monkeypatch, unset):
    if unset is None:
        monkeypatch.delenv("SPECGUARD_MODE", raising=False)
    else:
        monkeypatch.setenv("SPECGUARD_MODE", unset)
    with contracts.checking(mode="strict"):
        plugin.register()
        assert not plugin.requested()
    assert fake_sglang.HookRegistry._hooks == []


def test_plugin_does_nothing_when_checks_are_off(fake_sglang, monkeypatch):
    monkeypatch.setenv("SPECGUARD_MODE", "off")
    with contracts.checking(mode="off"):
        plugin.register()
    assert fake_sglang.HookRegistry._hooks == []


def test_plugin_installs_on_every_worker_sglang_builds(fake_sglang, monkeypatch):
    monkeypatch.setenv("SPECGUARD_MODE", "strict")
    with contracts.checking(mode="strict"):
        plugin.register()
        plugin.register()  # SGLang may load plugins in several places: one hook
        assert [h[0] for h in fake_sglang.HookRegistry._hooks] == [plugin.TARGET]
        fake_sglang.HookRegistry.apply_hooks()
        from sglang.srt.speculative.eagle_worker_v2 import (  # pyright: ignore[reportMissingImports]
            EAGLEWorkerV2 as Worker,
        )

        worker = Worker()
        assert sglang_install.installation_of(worker) is not None
        _drive(worker, "mixed-prompt-lengths")
        with pytest.raises(contracts.ContractViolation, match="SG658"):
            _drive(Worker(), "sg658-bonus-token-wrong-stride")


def test_plugin_refuses_an_unknown_worker_in_strict_and_logs_it_in_warn(
        fake_sglang, monkeypatch, caplog):
    monkeypatch.setenv("SPECGUARD_MODE", "warn")
    with contracts.checking(mode="warn"):
        plugin.register()
        fake_sglang.HookRegistry.apply_hooks()
        from sglang.srt.speculative.eagle_worker_v2 import (  # pyright: ignore[reportMissingImports]
            EAGLEWorkerV2 as Worker,
        )

        with caplog.at_level(logging.WARNING, logger="specguard"):
            tree = Worker(topk=4)
        assert sglang_install.installation_of(tree) is None
        assert "not checking this SGLang worker: EAGLEWorkerV2.topk is 4" in caplog.text
    with contracts.checking(mode="strict"), pytest.raises(UnsupportedEngine, match="topk"):
        Worker(topk=4)
    stage = Worker()
    assert sglang_install.installation_of(stage) is not None
    staged = Worker.__new__(Worker)
    EAGLEWorkerV2.__init__(staged)
    staged._draft_worker = None
    assert plugin.after_worker_init(None, staged) is None  # a stage without the draft
    assert sglang_install.installation_of(staged) is None
