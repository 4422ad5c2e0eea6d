"""One call to check a live SGLang ``EAGLEWorker`` (releases 0.5.10 and 0.5.11, spec v1):
:func:`install` / :func:`uninstall`.

::

    from specguard.adapters import install_sglang, uninstall_sglang, sglang_installed

    install_sglang(worker)        # worker: sglang.srt.speculative.eagle_worker.EAGLEWorker
    ...
    uninstall_sglang(worker)

``install`` wraps five methods of that one worker object (its class is left alone), the
hand-overs of one step of SGLang's non-overlap EAGLE/MTP path:

* ``forward_batch_generation(batch)``: the ``ScheduleBatch`` on entry
  (:meth:`~specguard.adapters.engines.sglang.view.SglangView.schedule`);
* ``forward_draft_extend(batch, hidden_states, next_token_ids, seq_lens_cpu,
  mm_input_embeds=None)``: the draft prefill, on return;
* ``draft(batch)``: the ``EagleVerifyInput`` it returns;
* ``verify(batch, spec_info)``: the ``EagleVerifyOutput`` and the verify forward's
  ``ModelWorkerBatch`` it returns;
* ``forward_draft_extend_after_decode(batch)``: the draft extend, on return.

The configuration is the worker's own: ``speculative_num_steps``, ``topk`` (only 1, MTP,
is supported: the chain rules hold SGLang to one linear chain), ``speculative_num_draft_
tokens`` (``steps + 1``), the target's vocabulary and context length, the KV pool's size.
Every method and value is checked before the first one is wrapped, and a worker of
another shape (the overlap ``EAGLEWorkerV2``, a method with other parameters) is refused
with :class:`UnsupportedEngine`, leaving it as it was. SGLang is never imported.
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
from specguard.adapters.engines.sglang.view import SglangView
from specguard.adapters.step_tracker import StepTracker

__all__ = [
    "METHODS",
    "Installation",
    "UnsupportedEngine",
    "install",
    "installation_of",
    "installed",
    "uninstall",
]

_ATTRIBUTE = "_specguard_installation"

#: The methods wrapped, with the parameters SGLang 0.5.10.post1 gives them (after
#: ``self``), as recorded from its source.
METHODS: dict[str, tuple[str, ...]] = {
    "forward_batch_generation": ("batch",),
    "forward_draft_extend": ("batch", "hidden_states", "next_token_ids", "seq_lens_cpu",
                             "mm_input_embeds"),
    "draft": ("batch",),
    "verify": ("batch", "spec_info"),
    "forward_draft_extend_after_decode": ("batch",),
}


@dataclass
class Installation:
    """What :func:`install` put on one worker, and what :func:`uninstall` takes off."""

    view: SglangView
    """The view the checks go through (its tracker carries state from step to step)."""
    patches: MethodPatches = field(default_factory=MethodPatches)
    """The methods wrapped, and how to put them back."""


@refusing_what_raises("SGLang EAGLEWorker")
def install(eagle_worker: Any, *, view: SglangView | None = None) -> Installation:
    """Wrap a live ``EAGLEWorker``'s hand-over methods with specguard's SGLang checks.

    ``view`` replaces the view built from the worker's configuration. Raises
    :class:`UnsupportedEngine` when the worker is not the v1 ``EAGLEWorker`` shape
    specguard reads, and leaves it untouched then.
    """
    worker = eagle_worker
    if getattr(worker, "__dict__", {}).get(_ATTRIBUTE) is not None:
        raise UnsupportedEngine("specguard is already installed on this worker")
    for name in METHODS:  # a missing method says more than another's parameters
        _check_method(worker, name)
    for name, parameters in METHODS.items():
        _check_signature(worker, name, parameters)
    checked = view or view_for(worker)
    installation = Installation(checked)
    patches = installation.patches
    patches.stage(worker, "forward_batch_generation", _on_entry(checked.schedule))
    patches.stage(worker, "forward_draft_extend", _after_draft_prefill(checked))
    patches.stage(worker, "draft", _after_draft(checked))
    patches.stage(worker, "verify", _after_verify(checked))
    patches.stage(worker, "forward_draft_extend_after_decode", _after_draft_extend(checked))
    patches.apply()
    worker.__dict__[_ATTRIBUTE] = installation
    return installation


def uninstall(eagle_worker: Any) -> None:
    """Undo :func:`install` on this worker; a worker without it is left as it is."""
    installation = getattr(eagle_worker, "__dict__", {}).pop(_ATTRIBUTE, None)
    if installation is not None:
        installation.patches.undo()


@contextlib.contextmanager
def installed(eagle_worker: Any, **options: Any) -> Iterator[Installation]:
    """:func:`install` for the duration of a ``with`` block."""
    installation = install(eagle_worker, **options)
    try:
        yield installation
    finally:
        uninstall(eagle_worker)


def installation_of(eagle_worker: Any) -> Installation | None:
    """The :class:`Installation` on a worker, or None."""
    found: Installation | None = getattr(eagle_worker, "__dict__", {}).get(_ATTRIBUTE)
    return found


def view_for(worker: Any) -> SglangView:
    """The view of a worker's own configuration, with a step tracker."""
    owner = type(worker).__name__
    steps = engine_count(getattr(worker, "speculative_num_steps", None),
                         f"{owner}.speculative_num_steps")
    topk = engine_count(getattr(worker, "topk", None), f"{owner}.topk")
    if topk != 1:
        raise UnsupportedEngine(
            f"{owner}.topk is {topk}: specguard checks SGLang's MTP path, EAGLE with "
            "topk=1 (one linear chain per request)")
    tokens = engine_count(getattr(worker, "speculative_num_draft_tokens", None),
                          f"{owner}.speculative_num_draft_tokens")
    if tokens != steps + 1:
        raise UnsupportedEngine(
            f"{owner}.speculative_num_draft_tokens is {tokens} with topk=1 and "
            f"speculative_num_steps={steps}: SGLang forces it to steps + 1 = {steps + 1}")
    target = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    config = getattr(target, "model_config", None) or getattr(worker, "model_config", None)
    vocab = engine_count(getattr(config, "vocab_size", None), "model_config.vocab_size")
    context = getattr(config, "context_len", None)
    allocator = getattr(worker, "token_to_kv_pool_allocator", None)
    size = getattr(allocator, "size", None)
    page = getattr(worker, "page_size", 1)
    # Slot 0 is the pool's padding slot; a page's worth of slots sit past ``size``.
    slots = size + (page if isinstance(page, int) and page >= 1 else 1) \
        if isinstance(size, int) and not isinstance(size, bool) and size >= 1 else None
    return SglangView(spec_steps=steps, vocab_size=vocab, topk=topk, num_slots=slots,
                      max_model_len=context if isinstance(context, int)
                      and not isinstance(context, bool) and context >= 1 else None,
                      tracker=StepTracker())


def _check_method(worker: Any, name: str) -> None:
    if not callable(getattr(worker, name, None)):
        raise UnsupportedEngine(
            f"{type(worker).__name__} has no method {name}(): specguard reads SGLang "
            "0.5.10's v1 EAGLEWorker (the overlap EAGLEWorkerV2 and later releases are not "
            "this shape)")


def _check_signature(worker: Any, name: str, parameters: tuple[str, ...]) -> None:
    owner = type(worker).__name__
    method = getattr(worker, name)
    try:
        found = tuple(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        raise UnsupportedEngine(f"{owner}.{name}() has no signature to read") from None
    if found != parameters:
        raise UnsupportedEngine(
            f"{owner}.{name}() takes ({', '.join(found)}); specguard reads SGLang 0.5.10's "
            f"({', '.join(parameters)})")


Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


def _on_entry(check: Callable[[Any], Any]) -> Wrap:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def forward_batch_generation(batch: Any) -> Any:
            check(batch)
            return original(batch)

        return forward_batch_generation

    return make


def _after_draft_prefill(view: SglangView) -> Wrap:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def forward_draft_extend(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            given = signature.bind(*args, **kwargs).arguments
            view.draft_prefill(given["batch"], given["next_token_ids"])
            return result

        return forward_draft_extend

    return make


def _after_draft(view: SglangView) -> Wrap:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def draft(batch: Any) -> Any:
            verify_input = original(batch)
            if not _idle(batch):
                view.drafted(batch, verify_input)
            return verify_input

        return draft

    return make


def _after_verify(view: SglangView) -> Wrap:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def verify(batch: Any, spec_info: Any) -> Any:
            idle = _idle(batch)
            result = original(batch, spec_info)
            if not idle and isinstance(result, tuple) and len(result) == 4:
                view.verified(batch, spec_info, result[1], result[2])
            return result

        return verify

    return make


def _after_draft_extend(view: SglangView) -> Wrap:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def forward_draft_extend_after_decode(batch: Any) -> Any:
            result = original(batch)
            if not _idle(batch):
                view.draft_extend(batch)
            return result

        return forward_draft_extend_after_decode

    return make


def _idle(batch: Any) -> bool:
    """An ``IDLE`` batch (data-parallel padding) has no rows to check."""
    return getattr(getattr(batch, "forward_mode", None), "name", None) == "IDLE"
