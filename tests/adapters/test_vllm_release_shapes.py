"""install() on the real method signatures of every vLLM release we read, with no
``version=``: what it wraps and how the view reads are decided from the code.

The signatures are data recorded from each release's sdist
(``tests/adapters/data/vllm_signatures.json``, by ``tools/record_corpus/vllm_signatures.py``).
Each case writes a ``vllm`` package whose runner module defines classes with exactly
those parameter lists, and, where the release clamps ``-1`` draft slots, the clamp
statement in ``_preprocess`` as the release has it, so the source is read as it would be.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from specguard import contracts
from specguard.adapters import Mrv2View, UnsupportedEngine, VllmView, install_vllm
from specguard.adapters.engines.vllm.release import parse_version

DATA = json.loads((Path(__file__).parent / "data" / "vllm_signatures.json").read_text())
RELEASES = DATA["releases"]
MRV2_RELEASES = [r for r, facts in RELEASES.items() if facts["has_model_runner_v2"]]


def _method(name: str, parameters: list[str], body: str = "return None") -> str:
    # Every parameter gets a default: only the names matter to install().
    listed = ", ".join(["self", *(f"{p}=None" for p in parameters)])
    return f"    def {name}({listed}):\n        {body}\n"


def _v1_module(facts: dict[str, Any]) -> str:
    runner = facts["gpu_model_runner"]
    clamp = facts["clamp_statement"]
    preprocess = (f"    def _preprocess(self):\n        if self.speculative_config is not None:\n"
                  f"            {clamp}\n" if clamp else
                  "    def _preprocess(self):\n        return None\n")
    return (
        "from types import SimpleNamespace\n\n"
        "class EagleProposer:\n"
        + _method("propose", facts["drafter"]["propose"])
        + "\nclass GPUModelRunner:\n"
        "    def __init__(self):\n"
        "        self.speculative_config = SimpleNamespace(num_speculative_tokens=3)\n"
        "        self.model_config = SimpleNamespace(get_vocab_size=lambda: 1000)\n"
        "        self.scheduler_config = SimpleNamespace(async_scheduling=False)\n"
        "        self.input_batch = SimpleNamespace(req_ids=[])\n"
        "        self.drafter = EagleProposer()\n"
        + _method("_update_states", runner["_update_states"])
        + _method("_sample", runner["_sample"])
        + preprocess)


def _mrv2_module(facts: dict[str, Any]) -> str:
    v2 = facts["model_runner_v2"]
    return (
        "class MTPSpeculator:\n"
        + _method("propose", v2["speculator"]["propose"])
        + "\nclass GPUModelRunner:\n"
        "    def __init__(self):\n"
        "        self.speculative_config = object()\n"
        "        self.num_speculative_steps = 3\n"
        "        self.vocab_size = 1000\n"
        "        self.max_num_reqs = 8\n"
        "        self.speculator = MTPSpeculator()\n"
        + _method("prepare_inputs", v2["prepare_inputs"])
        + _method("sample", v2["sample"]))


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """Write a ``vllm`` package reporting ``version`` with one runner module; import it."""
    saved = {n: m for n, m in sys.modules.items() if n == "vllm" or n.startswith("vllm.")}
    for name in saved:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delenv("SPECGUARD_VLLM_VERSION", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(version: str, module: str, source: str) -> Any:
        parts = module.split(".")
        folder = tmp_path
        for part in parts[:-1]:
            folder = folder / part
            folder.mkdir(exist_ok=True)
            (folder / "__init__.py").touch()
        (tmp_path / "vllm" / "__init__.py").write_text(f'__version__ = "{version}"\n')
        (folder / f"{parts[-1]}.py").write_text(textwrap.dedent(source))
        return __import__(module, fromlist=["GPUModelRunner"])

    yield make
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]
    sys.modules.update(saved)


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_every_release_installs_on_its_v1_runner_without_a_version(fake_vllm, release):
    facts = RELEASES[release]
    module = fake_vllm(f"{release}.dev3+g1234abc", "vllm.v1.worker.gpu_model_runner",
                       _v1_module(facts))
    installation = install_vllm(module.GPUModelRunner())
    shape = installation.shape
    assert installation.version == release  # the dev build reads as its release
    assert shape.kind == "v1"
    assert shape.sample_index == facts["sample_index_name"]
    assert shape.dynamic_k == facts["propose_takes_num_speculative_tokens"]
    assert shape.masks_placeholders == facts["clamps_placeholder_drafts"]
    assert shape.masking_from == ("GPUModelRunner._preprocess clamps input_ids"
                                  if facts["clamps_placeholder_drafts"]
                                  else "GPUModelRunner._preprocess has no clamp")
    assert isinstance(installation.view, VllmView)
    assert installation.view.masks_placeholders == facts["clamps_placeholder_drafts"]


def test_a_minus_one_slot_is_a_bug_where_the_runner_does_not_clamp(fake_vllm):
    """0.24.0 embeds a -1 draft slot (no clamp): SG108 at full depth; 0.33.0 clamps it."""
    from vllm_traffic import scheduler_output

    verdicts = {}
    for release in ("0.24.0", "0.33.0"):
        module = fake_vllm(release, "vllm.v1.worker.gpu_model_runner",
                           _v1_module(RELEASES[release]))
        for name in [n for n in sys.modules if n.startswith("vllm")]:
            del sys.modules[name]
        view = install_vllm(module.GPUModelRunner()).view
        assert isinstance(view, VllmView)
        output = scheduler_output({
            "num_scheduled_tokens": {"a": 4}, "total_num_scheduled_tokens": 4,
            "scheduled_spec_decode_tokens": {"a": [-1, -1, -1]}, "scheduled_new_reqs": [],
            "scheduled_cached_reqs": {"req_ids": ["a"], "num_computed_tokens": [7]},
            "finished_req_ids": []})
        with contracts.checking(mode="warn", depth="full"):
            step = view.schedule(output)
            verdicts[release] = [v.code for v in contracts.validate(
                step.draft_tokens, config=contracts.Config(mode=contracts.Mode.WARN,
                                                           depth=contracts.Depth.FULL))]
    assert verdicts == {"0.24.0": ["SG108"], "0.33.0": []}


@pytest.mark.parametrize("release", MRV2_RELEASES)
def test_model_runner_v2_installs_on_its_release_signatures(fake_vllm, release):
    """From 0.24.0 every release's MRV2 installs; before it (0.12.0 on) its sampler
    output and input batch lack the counts the view reads, and it is refused, untouched,
    instead of being read as zeros (SG624 and SG629 on valid traffic)."""
    module = fake_vllm(release, "vllm.v1.worker.gpu.model_runner",
                       _mrv2_module(RELEASES[release]))
    runner = module.GPUModelRunner()
    if parse_version(release) < (0, 24, 0):
        with pytest.raises(UnsupportedEngine) as refused:
            install_vllm(runner)
        assert str(refused.value).startswith(
            f"Model Runner V2 of vLLM {release} is not supported (it is from 0.24.0 on): ")
        assert "sample" not in vars(runner) and "prepare_inputs" not in vars(runner)
        return
    installation = install_vllm(runner)
    assert installation.shape.kind == "model-runner-v2"
    assert isinstance(installation.view, Mrv2View)
    assert installation.view.scheduler_view.masks_placeholders  # MRV2 fills every slot


def test_every_release_from_0_12_is_in_the_signature_data():
    """The data holds every release from 0.11.0 to 0.33.0 (0.15.x from their wheels,
    which have no sdist), so a release between the recorded ones is checked too."""
    minors = {parse_version(r)[1] for r in RELEASES}
    assert set(range(11, 34)) <= minors


def test_a_runner_of_an_unknown_shape_is_refused_in_one_line(fake_vllm):
    facts = json.loads(json.dumps(RELEASES["0.33.0"]))
    facts["drafter"]["propose"] = ["num_speculative_tokens", "target_token_ids"]
    module = fake_vllm("0.40.0", "vllm.v1.worker.gpu_model_runner", _v1_module(facts))
    runner = module.GPUModelRunner()
    with pytest.raises(UnsupportedEngine) as refused:
        install_vllm(runner)
    assert str(refused.value) == (
        "EagleProposer.propose(num_speculative_tokens, target_token_ids) lacks "
        "target_positions, next_token_ids, common_attn_metadata: specguard reads those "
        "arguments by name, and this build (read as vLLM 0.40.0) has another shape")
    assert "\n" not in str(refused.value) and "_sample" not in vars(runner)
