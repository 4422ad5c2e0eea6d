"""One call to check a live SGLang ``EAGLEWorkerV2``: :func:`install` / :func:`uninstall`.

::

    from specguard.adapters.engines.sglang.v2 import install

    install.install(worker)       # worker: EAGLEWorkerV2, after __init__
    ...
    install.uninstall(worker)

``install`` wraps three methods of that one worker (the classes are left alone):

* ``forward_batch_generation(batch, ...)`` (0.5.23: ``batch, on_publish, grammar_barrier,
  pp_proxy_tensors``; 0.5.16: ``batch, on_publish``): the
  ``ScheduleBatch`` is checked as it enters (``resolve_forward_inputs`` has run;
  :meth:`~specguard.adapters.engines.sglang.v2.view.SglangV2View.schedule`), and the
  result's ``next_draft_input`` as it leaves (``SglangV2View.drafted``);
* ``draft_worker.draft(batch)``: the ``EagleVerifyInput`` it returns
  (``SglangV2View.verify_input``);
* ``verify(batch, ...)``: ``run_eagle_verify``'s result (``SglangV2View.verified``).

Every method is checked for the parameters specguard reads before the first is wrapped
(the overlap worker's traffic of 0.5.16, 0.5.19 and 0.5.23 is in the conformance corpus);
a worker without them is refused with :class:`UnsupportedEngine` and left untouched.
Not covered, and refused: a tree (``topk > 1``: MTP is ``topk = 1``), adaptive speculation
(its step count changes batch by batch), a pipeline stage that hosts no draft. A step
SGLang hands a pre-built verify input (pipeline parallelism) is skipped.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from specguard.adapters._install import (
    MethodPatches,
    UnsupportedEngine,
    engine_count,
    refusing_what_raises,
)
from specguard.adapters.engines.sglang.v2.view import SglangV2Step, SglangV2View
from specguard.adapters.step_tracker import StepTracker

__all__ = ["METHODS", "Installation", "UnsupportedEngine", "install", "installation_of",
           "installed", "uninstall"]

#: The methods wrapped, where they live, and the parameters specguard reads: only these
#: are required, so a release that adds or drops others (0.5.16 has no
#: ``grammar_barrier``) installs as long as what is read is there.
METHODS: dict[str, tuple[str, ...]] = {
    "EAGLEWorkerV2.forward_batch_generation": ("batch",),
    "EAGLEWorkerV2.verify": ("batch",),
    "EagleDraftWorker.draft": ("batch",),
}
_ATTRIBUTE = "_specguard_installation"
Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass
class Installation:
    """What :func:`install` put on one worker, and what :func:`uninstall` takes off."""

    view: SglangV2View
    """The view the checks go through (its trackers carry state from step to step)."""
    step: SglangV2Step | None = None
    """The step in flight, set at the worker's entry."""
    batch: Any = None
    """The batch it was read from: ``draft`` and ``verify`` are checked only when handed
    that very batch."""
    patches: MethodPatches = field(default_factory=MethodPatches)
    """The methods wrapped, and how to put them back."""


@refusing_what_raises("SGLang EAGLEWorkerV2")
def install(worker: Any, *, view: SglangV2View | None = None) -> Installation:
    """Wrap a live ``EAGLEWorkerV2``'s ``forward_batch_generation``, ``verify`` and its draft
    worker's ``draft`` with specguard's SGLang checks; returns the :class:`Installation`.

    ``view`` replaces the view built from the worker's own configuration. Raises
    :class:`UnsupportedEngine` (the worker untouched) for a worker specguard cannot check.
    """
    if getattr(worker, "__dict__", {}).get(_ATTRIBUTE) is not None:
        raise UnsupportedEngine("specguard is already installed on this SGLang worker")
    owner = f"{type(worker).__module__}.{type(worker).__name__}"
    draft_worker = getattr(worker, "draft_worker", None)
    if draft_worker is None:
        raise UnsupportedEngine(
            f"{owner} hosts no draft worker (a pipeline stage before the last): it neither "
            "drafts nor verifies, so specguard has nothing to check there")
    for target, name in ((worker, "forward_batch_generation"), (worker, "verify"),
                         (draft_worker, "draft")):
        _check_parameters(target, name)
    checked = view or _view_for(worker)
    installation = Installation(checked)
    patches = installation.patches
    patches.stage(worker, "forward_batch_generation", _around_forward(installation))
    patches.stage(draft_worker, "draft", _after_draft(installation))
    patches.stage(worker, "verify", _after_verify(installation))
    patches.apply()
    worker.__dict__[_ATTRIBUTE] = installation
    return installation


def uninstall(worker: Any) -> None:
    """Undo :func:`install` on this worker; a worker without it is left as it is."""
    installation = getattr(worker, "__dict__", {}).pop(_ATTRIBUTE, None)
    if installation is not None:
        installation.patches.undo()


@contextlib.contextmanager
def installed(worker: Any, **options: Any) -> Iterator[Installation]:
    """:func:`install` for the duration of a ``with`` block."""
    installation = install(worker, **options)
    try:
        yield installation
    finally:
        uninstall(worker)


def installation_of(worker: Any) -> Installation | None:
    """The :class:`Installation` on a worker, or None."""
    found: Installation | None = getattr(worker, "__dict__", {}).get(_ATTRIBUTE)
    return found


def _check_parameters(target: Any, name: str) -> None:
    """The method exists and takes the parameters specguard reads (by name)."""
    owner = type(target).__name__
    method = getattr(target, name, None)
    if not callable(method):
        raise UnsupportedEngine(f"{owner} has no method {name}()")
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        raise UnsupportedEngine(f"{owner}.{name}() has no signature specguard can read") \
            from None
    wanted = next(params for key, params in METHODS.items() if key.endswith(f".{name}"))
    missing = [p for p in wanted if p not in parameters]
    if missing:
        raise UnsupportedEngine(
            f"{owner}.{name}() has no parameter {', '.join(missing)}, which specguard "
            f"reads ({name}({', '.join(parameters)}))")


def _view_for(worker: Any) -> SglangV2View:
    owner = type(worker).__name__
    topk = engine_count(getattr(worker, "topk", None), f"{owner}.topk")
    if topk != 1:
        raise UnsupportedEngine(
            f"{owner}.topk is {topk}: specguard checks MTP, EAGLE with topk = 1 (one chain "
            "per request); a draft tree is not covered")
    if getattr(worker, "adaptive_controller", None) is not None:
        raise UnsupportedEngine(
            f"{owner} runs adaptive speculation: its step count changes batch by batch, "
            "which the view's fixed spec_steps does not cover")
    steps = engine_count(getattr(worker, "speculative_num_steps", None),
                         f"{owner}.speculative_num_steps")
    slots = engine_count(getattr(worker, "speculative_num_draft_tokens", None),
                         f"{owner}.speculative_num_draft_tokens", minimum=2)
    if slots != steps + 1:
        raise UnsupportedEngine(
            f"{owner}.speculative_num_draft_tokens is {slots} for {steps} steps: with topk = 1 "
            f"SGLang forces it to steps + 1 = {steps + 1}")
    model = getattr(getattr(worker, "target_worker", None), "model_config", None)
    vocab = engine_count(getattr(model, "vocab_size", None),
                         f"{owner}.target_worker.model_config.vocab_size")
    return SglangV2View(spec_steps=steps, vocab_size=vocab, tracker=StepTracker(),
                        carried=True)


def _argument(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any],
              name: str) -> Any:
    try:
        return signature.bind(*args, **kwargs).arguments.get(name)
    except TypeError:  # the engine's own call fails the same way
        return None


def _covered(batch: Any) -> bool:
    """Whether the step runs the path the view reads: not a pre-built verify input (a
    pipeline-parallel round), and a batch with requests."""
    spec = getattr(batch, "spec_info", None)
    prebuilt = getattr(spec, "is_verify_input", None)
    return not (callable(prebuilt) and prebuilt())


def _around_forward(installation: Installation) -> Wrapper:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def forward_batch_generation(*args: Any, **kwargs: Any) -> Any:
            batch = _argument(signature, args, kwargs, "batch")
            installation.step = installation.batch = None
            if batch is not None and _covered(batch):
                installation.step = installation.view.schedule(batch)
                installation.batch = batch
            try:
                result = original(*args, **kwargs)
                step = installation.step
                if step is not None:
                    installation.view.drafted(step, getattr(result, "next_draft_input", None))
                return result
            finally:
                installation.step = installation.batch = None

        return forward_batch_generation

    return make


def _in_flight(installation: Installation, signature: inspect.Signature,
               args: tuple[Any, ...], kwargs: dict[str, Any]) -> SglangV2Step | None:
    step = installation.step
    if step is None or step.extend:
        return None
    batch = _argument(signature, args, kwargs, "batch")
    return step if batch is installation.batch else None


def _after_draft(installation: Installation) -> Wrapper:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def draft(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            step = _in_flight(installation, signature, args, kwargs)
            if step is not None and not isinstance(result, tuple):  # not the PP tail draft
                installation.view.verify_input(step, result)
            return result

        return draft

    return make


def _after_verify(installation: Installation) -> Wrapper:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def verify(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            step = _in_flight(installation, signature, args, kwargs)
            if step is not None:
                installation.view.verified(step, result)
            return result

        return verify

    return make
