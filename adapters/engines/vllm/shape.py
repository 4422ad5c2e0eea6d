"""What a vLLM runner's own code has, read off the live objects instead of a version list.

:func:`install <specguard.adapters.engines.vllm.install.install>` wraps the methods a
runner really has and reads their arguments by the names they really take, so any
release whose code has those names is checked, whatever it calls itself:

* the V1 ``GPUModelRunner``: ``_update_states(scheduler_output)``, ``_sample(logits,
  spec_decode_metadata)``, and the drafter's ``propose`` with EAGLE's arguments, the
  sampled positions named ``last_token_indices`` (0.11 to 0.15) or
  ``token_indices_to_sample`` (0.16 on; from 0.24 ``propose`` also takes
  ``num_speculative_tokens`` first);
* Model Runner V2 (``vllm.v1.worker.gpu``, 0.24 on; earlier ones are refused):
  ``prepare_inputs(scheduler_output, ...)`` returning the ``InputBatch``,
  ``sample(..., input_batch, ...)`` and the speculator's ``propose(input_batch, ...)``;
* whether the runner clamps ``-1`` draft slots before the target embeds them, read from
  the source of ``GPUModelRunner._preprocess`` (0.33.0:
  ``self.input_ids.gpu[:num_input_tokens].clamp_(min=0)``; 0.24.0 has no clamp, so a
  ``-1`` slot it embeds is a bug there, not a masked slot). Where the source cannot be
  read, the release decides (clamped from 0.25.0 on), and the shape says so.

A runner whose methods lack what specguard reads is refused with one line naming the
method and the parameters it lacks.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any

from specguard.adapters._install import UnsupportedEngine
from specguard.adapters.engines.vllm.release import MASKING_SINCE, MRV2_SINCE, parse_version

__all__ = ["MRV2_NEEDS", "SAMPLE_INDEX_NAMES", "V1_NEEDS", "RunnerShape", "mrv2_shape",
           "v1_shape"]

#: Per wrapped method of the V1 runner, the parameters specguard binds by name.
V1_NEEDS: dict[str, tuple[str, ...]] = {
    "_update_states": ("scheduler_output",),
    "_sample": ("logits", "spec_decode_metadata"),
    "propose": ("target_token_ids", "target_positions", "next_token_ids",
                "common_attn_metadata"),
}
#: The names ``propose`` has given the positions it samples, newest first.
SAMPLE_INDEX_NAMES = ("token_indices_to_sample", "last_token_indices")
#: Per wrapped method of Model Runner V2, the parameters specguard binds by name.
MRV2_NEEDS: dict[str, tuple[str, ...]] = {
    "prepare_inputs": ("scheduler_output",),
    "sample": ("input_batch",),
    "propose": ("input_batch",),
}

# The clamp of 0.33.0's _preprocess, in any spelling of the same statement.
_CLAMP = re.compile(r"input_ids\b[^\n]*\.clamp_?\(\s*min\s*=\s*0\s*\)")


@dataclass(frozen=True)
class RunnerShape:
    """What install() found in one runner's code."""

    release: str
    """The release the runner is read as (for messages, the corpus and the view)."""
    kind: str
    """``"v1"`` or ``"model-runner-v2"``."""
    sample_index: str = SAMPLE_INDEX_NAMES[0]
    """The V1 drafter's name for the positions it samples."""
    dynamic_k: bool = False
    """Whether the V1 drafter takes ``num_speculative_tokens`` (a per-step ``K_t``)."""
    masks_placeholders: bool = False
    """Whether the runner clamps ``-1`` draft slots before the target embeds them."""
    masking_from: str = ""
    """How :attr:`masks_placeholders` was decided: the source read, or the release."""


def _parameters(target: Any, name: str) -> tuple[str, ...]:
    owner = type(target).__name__
    method = getattr(target, name, None)
    if not callable(method):
        raise UnsupportedEngine(f"{owner} has no method {name}(): specguard checks vLLM's "
                                "runner through it")
    try:
        return tuple(inspect.signature(method).parameters)
    except (TypeError, ValueError) as error:
        raise UnsupportedEngine(f"{owner}.{name}() has no readable signature: {error}") \
            from None


def _require(target: Any, name: str, needed: tuple[str, ...], release: str) -> tuple[str, ...]:
    found = _parameters(target, name)
    missing = [p for p in needed if p not in found]
    if missing:
        raise UnsupportedEngine(
            f"{type(target).__name__}.{name}({', '.join(found)}) lacks "
            f"{', '.join(missing)}: specguard reads those arguments by name, and this build "
            f"(read as vLLM {release}) has another shape")
    return found


def v1_shape(runner: Any, drafter: Any, release: str) -> RunnerShape:
    """The shape of a V1 ``GPUModelRunner`` and its EAGLE/MTP drafter."""
    _require(runner, "_update_states", V1_NEEDS["_update_states"], release)
    _require(runner, "_sample", V1_NEEDS["_sample"], release)
    propose = _require(drafter, "propose", V1_NEEDS["propose"], release)
    index = next((n for n in SAMPLE_INDEX_NAMES if n in propose), None)
    if index is None:
        raise UnsupportedEngine(
            f"{type(drafter).__name__}.propose({', '.join(propose)}) names none of "
            f"{', '.join(SAMPLE_INDEX_NAMES)}: specguard cannot tell which positions it "
            f"samples (read as vLLM {release})")
    masks, reason = _masks_placeholders(runner, release)
    return RunnerShape(release, "v1", index, "num_speculative_tokens" in propose, masks,
                       reason)


def mrv2_shape(runner: Any, speculator: Any, release: str) -> RunnerShape:
    """The shape of a Model Runner V2 ``GPUModelRunner`` and its speculator. MRV2 fills
    every draft slot from its device rows and clamps nothing: a ``-1`` it embeds is
    SG628, whatever the release. Before 0.24.0 (:data:`MRV2_SINCE`) its sampler output
    and input batch lack the per-request counts the view reads: refused, rather than
    read as zeros and reported as violations of valid traffic."""
    if parse_version(release) < MRV2_SINCE:
        since = ".".join(map(str, MRV2_SINCE))
        raise UnsupportedEngine(
            f"Model Runner V2 of vLLM {release} is not supported (it is from {since} on): "
            "before it, sample() returns the sampled and rejected counts beside the "
            "sampler output and the input batch has no per-request draft counts, which "
            "specguard reads; the V1 GPUModelRunner of this release is supported")
    for target, name in ((runner, "prepare_inputs"), (runner, "sample"),
                         (speculator, "propose")):
        _require(target, name, MRV2_NEEDS[name], release)
    return RunnerShape(release, "model-runner-v2", masking_from="Model Runner V2 (no clamp)")


def _masks_placeholders(runner: Any, release: str) -> tuple[bool, str]:
    method = getattr(type(runner), "_preprocess", None)
    if method is not None:
        try:
            source = inspect.getsource(method)
        except (OSError, TypeError):
            pass
        else:
            if _CLAMP.search(source):
                return True, "GPUModelRunner._preprocess clamps input_ids"
            return False, "GPUModelRunner._preprocess has no clamp"
    since = ".".join(map(str, MASKING_SINCE))
    clamps = parse_version(release) >= MASKING_SINCE
    return clamps, (f"release {release} {'>=' if clamps else '<'} {since} "
                    "(the runner's source could not be read)")
