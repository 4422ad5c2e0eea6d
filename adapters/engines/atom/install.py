"""Put the ATOM contracts around a live ``ModelRunner`` with one call.

::

    from specguard.adapters import atom_installed, install_atom, uninstall_atom

    view = install_atom(runner)          # runner: ATOM's ModelRunner, in its worker
    ...
    uninstall_atom(runner)

    with atom_installed(runner, layout="pre-1771"):   # or scoped
        ...

What is wrapped, on the instance only (the class, other runners and ATOM's code are left
alone), with the method names and signatures of ATOM from 80b5b02be to ffdf3bb5d:

* ``ModelRunner.forward(batch)``: the batch is checked by an :class:`AtomView` (with a
  :class:`StepTracker`) before the runner sees it; a DP dummy batch
  (``batch.is_dummy_run``) is not checked, but makes the next batch's seqs new to the
  runner, as the dummy forward does;
* ``ModelRunner.postprocess(batch, logits, temperatures, top_ks, top_ps, all_greedy,
  hidden_states, needs_independent_noise=False)``: while it runs, the rejection
  sampler's result (``self.rejection_sampler.forward`` → ``sampled_tokens [bs, k+1]``,
  ``num_bonus_tokens [bs]``) goes to :meth:`AtomView.verified`;
* ``ModelRunner.propose_draft_token_ids(batch, input_ids, hidden_states, next_token_ids,
  num_reject_tokens[, align_only])``: after it returns, the MTP head's rows for the batch
  (``self.tokenID_processor.draft_token_ids``, ``[bs, k]`` on the device) go to
  :meth:`AtomView.drafted`, with ``next_token_ids`` (the token each seq sampled in the
  forward: a prefill's first token joins the seq's history for SG608); an ``align_only``
  call (a DP alignment pass over middle chunks, ffdf3bb5d) drafts nothing and is passed
  through.

Values on the accelerator are checked as the mode and ``device_values`` say: shapes at
once, values without a host sync only as deferred verdicts. A runner whose methods or
signatures differ from these is refused with :class:`UnsupportedEngine`, naming what differs.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from specguard.adapters._install import (
    MethodPatches,
    UnsupportedEngine,
    engine_count,
    refusing_what_raises,
)
from specguard.adapters.engines.atom.view import AtomView
from specguard.adapters.step_tracker import StepTracker

__all__ = ["SIGNATURES", "UnsupportedEngine", "install", "installed", "is_installed", "uninstall"]

_STATE = "_specguard_atom_install"

#: The parameter lists install() knows, per method (after ``self``), oldest first.
SIGNATURES: dict[str, tuple[tuple[str, ...], ...]] = {
    "forward": (("batch",),),
    "postprocess": (("batch", "logits", "temperatures", "top_ks", "top_ps", "all_greedy",
                     "hidden_states", "needs_independent_noise"),),
    "propose_draft_token_ids": (
        ("batch", "input_ids", "hidden_states", "next_token_ids", "num_reject_tokens"),
        ("batch", "input_ids", "hidden_states", "next_token_ids", "num_reject_tokens",
         "align_only"),
    ),
}


def _parameters(method: Any) -> tuple[str, ...]:
    signature = inspect.signature(method)  # follows functools.wraps of ATOM's decorators
    return tuple(name for name in signature.parameters if name != "self")


def _check(runner: Any) -> None:
    kind = type(runner).__name__
    if getattr(runner, _STATE, None) is not None:
        raise UnsupportedEngine(f"specguard is already installed on this {kind}; uninstall first")
    problems = []
    for name, known in SIGNATURES.items():
        method = getattr(runner, name, None)
        if not callable(method):
            problems.append(f"it has no method {name}()")
            continue
        try:
            found = _parameters(method)
        except (TypeError, ValueError):
            problems.append(f"{name}() has no readable signature")
            continue
        if found not in known:
            wanted = " or ".join(f"({', '.join(k)})" for k in known)
            problems.append(f"{name}({', '.join(found)}) is not {name}{wanted}")
    if not hasattr(runner, "tokenID_processor"):
        problems.append("it has no tokenID_processor")
    if problems:
        raise UnsupportedEngine(
            f"specguard.adapters.engines.atom.install cannot install on {kind}: "
            + "; ".join(problems)
            + " (known: ATOM ModelRunner from 80b5b02be to ffdf3bb5d)")


def _mtp_k(runner: Any) -> int:
    drafted = getattr(getattr(runner, "drafter", None), "mtp_k", None)
    if drafted is not None:
        return engine_count(drafted, f"{type(runner).__name__}.drafter.mtp_k")
    k = getattr(runner, "num_spec_tokens", None)
    if k is None:
        raise UnsupportedEngine(f"cannot read mtp_k from {type(runner).__name__} (no "
                                "drafter.mtp_k or num_spec_tokens): pass a view")
    return engine_count(k, f"{type(runner).__name__}.num_spec_tokens")


def _default_view(runner: Any, layout: str, tracker: bool) -> AtomView:
    config = getattr(runner, "config", None)
    vocab = getattr(getattr(config, "hf_config", None), "vocab_size", None)
    block = getattr(runner, "block_size", None) or getattr(config, "kv_cache_block_size", None)
    if vocab is None or block is None:
        raise UnsupportedEngine(f"cannot read vocab_size and block_size from "
                                f"{type(runner).__name__}.config: pass a view")
    vocab = engine_count(vocab, f"{type(runner).__name__}.config.hf_config.vocab_size")
    block = engine_count(block, f"{type(runner).__name__} block_size")
    return AtomView(mtp_k=_mtp_k(runner), vocab_size=vocab, block_size=block,
                    tracker=StepTracker() if tracker else None, layout=layout)


class _Installed:
    """What install() put on one runner: the view, the originals, the batch in flight."""

    def __init__(self, runner: Any, view: AtomView) -> None:
        self.runner = runner
        self.view = view
        self.batch: Any = None
        self.patches = MethodPatches()
        self.sampler = getattr(runner, "rejection_sampler", None)

    def wrap(self, runner: Any) -> None:
        """Stage every wrapper, then apply them together: a failure changes nothing."""
        for name, make in (("forward", self._forward), ("postprocess", self._postprocess),
                           ("propose_draft_token_ids", self._propose)):
            self.patches.stage(runner, name, make)
        if self.sampler is not None and callable(getattr(self.sampler, "forward", None)):
            self.patches.stage(self.sampler, "forward", self._verify)
        self.patches.apply()

    def unwrap(self, runner: Any) -> None:
        self.patches.undo()

    def _forward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def forward(batch: Any) -> Any:
            if getattr(batch, "is_dummy_run", False) is True:
                self.view.skipped_forward()
            else:
                self.view(batch)
            return original(batch)
        return forward

    def _postprocess(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def postprocess(batch: Any, *args: Any, **kwargs: Any) -> Any:
            self.batch = batch
            try:
                return original(batch, *args, **kwargs)
            finally:
                self.batch = None
        return postprocess

    def _verify(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if self.batch is not None and isinstance(result, tuple) and len(result) == 2:
                self.view.verified(self.batch, result[0], result[1])
            return result
        return forward

    def _propose(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def propose(batch: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(batch, *args, **kwargs)
            if not kwargs.get("align_only", False):
                processor = getattr(self.runner, "tokenID_processor", None)
                drafts = getattr(processor, "draft_token_ids", None)
                # (input_ids, hidden_states, next_token_ids, ...) after the batch
                sampled = kwargs.get("next_token_ids", args[2] if len(args) > 2 else None)
                if drafts is not None:
                    self.view.drafted(batch, drafts, sampled)
            return result
        return propose


@refusing_what_raises("ATOM ModelRunner")
def install(model_runner: Any, view: AtomView | None = None, *,
            layout: str = "pr1771", tracker: bool = True) -> AtomView:
    """Check every batch, verify result and draft of a live ATOM ``ModelRunner``.

    ``view`` defaults to an :class:`AtomView` with a :class:`StepTracker`, configured from
    the runner (``drafter.mtp_k``, ``config.hf_config.vocab_size``, ``block_size``) and
    modelling ``layout`` (``"pr1771"`` for ATOM from ROCm/ATOM#1771, ``"pre-1771"``
    before); ``tracker=False`` leaves the step tracker out (no step-to-step rule then).
    Returns the view. Raises :class:`UnsupportedEngine` when the runner is not one
    this module knows (a method missing, a signature that differs) or is already
    installed on.
    """
    _check(model_runner)
    view = view if view is not None else _default_view(model_runner, layout, tracker)
    state = _Installed(model_runner, view)
    state.wrap(model_runner)  # refuses a runner that cannot hold its wrappers, unchanged
    vars(model_runner)[_STATE] = state
    return view


def uninstall(model_runner: Any) -> None:
    """Restore the runner's methods as they were before :func:`install`."""
    state = getattr(model_runner, _STATE, None)
    if state is None:
        raise UnsupportedEngine(f"specguard is not installed on this {type(model_runner).__name__}")
    state.unwrap(model_runner)
    delattr(model_runner, _STATE)


def is_installed(model_runner: Any) -> bool:
    """Whether :func:`install` is in effect on ``model_runner``."""
    return getattr(model_runner, _STATE, None) is not None


@contextlib.contextmanager
def installed(model_runner: Any, view: AtomView | None = None, *,
              layout: str = "pr1771", tracker: bool = True) -> Iterator[AtomView]:
    """:func:`install` for the duration of a ``with`` block, then :func:`uninstall`."""
    view = install(model_runner, view, layout=layout, tracker=tracker)
    try:
        yield view
    finally:
        uninstall(model_runner)
