"""One call to check a live vLLM ``GPUModelRunner``: :func:`install` / :func:`uninstall`.

::

    from specguard.adapters import install_vllm, uninstall_vllm, vllm_installed

    install_vllm(runner)          # runner: vLLM's GPUModelRunner, after __init__
    ...
    uninstall_vllm(runner)

    with vllm_installed(runner):  # the same, for a block
        ...

``install`` wraps three methods of that one runner object (its class is left alone), and
a fourth where the runner has it:

* ``_update_states(scheduler_output)``: after it returns, the ``SchedulerOutput`` is
  checked in the runner's batch order (``input_batch.req_ids``, after vLLM's reordering,
  and after 0.11.1 strips the drafts of a step whose drafter did not run);
* ``_sample(logits, spec_decode_metadata)``: the rejection sampler's rows it returns;
* ``drafter.propose(...)``: what the MTP/EAGLE head is about to embed, and the drafts it
  returns (``K_t`` wide under 0.33's dynamic speculative decoding);
* ``sample_tokens(grammar_output)`` (from 0.11.1): before it applies the structured-output
  bitmask, the bitmask's rows against the logits' ``1 + K`` rows per request
  (:meth:`~specguard.adapters.engines.vllm.view.VllmView.logits_rows`, SG311-SG312).

Every check goes through a :class:`~specguard.adapters.engines.vllm.view.VllmView` built for the
runner (``mtp_k``, vocabulary, async scheduling and vLLM version read from the runner),
with a :class:`~specguard.adapters.step_tracker.StepTracker`, and honours
``SPECGUARD_MODE`` / ``SPECGUARD_DEPTH`` like every other guard.

Model Runner V2 (``vllm.v1.worker.gpu.model_runner``, vLLM 0.33.0) is wrapped at its own
hand-overs instead: ``prepare_inputs`` (the ``SchedulerOutput`` and the ``InputBatch``),
``sample`` and ``speculator.propose`` (see :mod:`specguard.adapters.engines.vllm.mrv2.install`);
``specguard.adapters.engines.vllm.plugin`` installs it on each MRV2 runner vLLM builds (its
speculator exists from ``__init__`` on), or call ``install`` on the runner yourself.

What to wrap, and how the view reads, is decided from what the runner's code has
(:mod:`~specguard.adapters.engines.vllm.shape`): the wrapped methods' real parameters,
whether the runner is Model Runner V2, and whether it clamps ``-1`` draft slots before
embedding. Every release from 0.11.0 on installs; a build whose methods lack what
specguard reads is refused with :class:`UnsupportedEngine`, naming the method and what it
lacks. The release is ``version=``, else ``SPECGUARD_VLLM_VERSION``, else
``vllm.__version__`` (a dev, rc or local build reads as its release); vLLM is imported
only to read its version, when ``install`` is called.
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
from specguard.adapters.engines.vllm.mrv2.install import (
    MRV2_MODULE,
    Mrv2Hooks,
    is_model_runner_v2,
    mrv2_view,
)
from specguard.adapters.engines.vllm.mrv2.view import Mrv2View
from specguard.adapters.engines.vllm.release import (
    ENV_VERSION,
    release_from_environment,
    release_of,
)
from specguard.adapters.engines.vllm.shape import RunnerShape, mrv2_shape, v1_shape
from specguard.adapters.engines.vllm.view import VllmStep, VllmView
from specguard.adapters.step_tracker import StepTracker

__all__ = ["Installation", "UnsupportedEngine", "install", "installed", "uninstall"]

_ATTRIBUTE = "_specguard_installation"

@dataclass
class Installation:
    """What :func:`install` put on one runner, and what :func:`uninstall` takes off."""

    view: VllmView | Mrv2View
    """The view the checks go through (its tracker carries state from step to step)."""
    version: str
    """The vLLM release the runner is read as."""
    shape: RunnerShape
    """What install() read off the runner's code."""
    step: VllmStep | None = None
    """The step in flight: set by ``_update_states``, read by the later checks."""
    patches: MethodPatches = field(default_factory=MethodPatches)
    """The methods wrapped, and how to put them back."""


@refusing_what_raises("vLLM GPUModelRunner")
def install(gpu_model_runner: Any, *, version: str | None = None,
            view: VllmView | Mrv2View | None = None, tracker: bool = True) -> Installation:
    """Wrap a live ``GPUModelRunner``'s ``_update_states``, ``_sample``, its drafter's
    ``propose`` and, where it has one, ``sample_tokens`` with specguard's vLLM checks;
    returns the :class:`Installation`.

    ``version`` overrides the release read from ``SPECGUARD_VLLM_VERSION`` or
    ``vllm.__version__``; it names the release in messages and decides how the view reads
    only where the runner's code cannot say (see
    :mod:`~specguard.adapters.engines.vllm.shape`). ``view`` replaces the view built from
    the runner's own configuration; that view has a step tracker, for the step-to-step
    rules, unless ``tracker=False`` (Model Runner V2's view keeps none). Raises
    :class:`UnsupportedEngine` when the runner's code lacks what specguard reads, and
    leaves the runner untouched then.
    """
    runner = gpu_model_runner
    if getattr(runner, "__dict__", {}).get(_ATTRIBUTE) is not None:
        raise UnsupportedEngine("specguard is already installed on this runner")
    release = _release(version)
    if is_model_runner_v2(runner):
        return _install_model_runner_v2(runner, release, view)
    _refuse_unknown_runner(runner)
    drafter = getattr(runner, "drafter", None)
    if getattr(runner, "speculative_config", None) is None or drafter is None:
        raise UnsupportedEngine(
            "this runner has no speculative decoding (speculative_config or drafter is "
            "None): specguard checks the MTP/EAGLE boundaries and has nothing to check")
    shape = v1_shape(runner, drafter, release)
    if isinstance(view, Mrv2View):
        raise UnsupportedEngine("this is vLLM's V1 GPUModelRunner: give it a VllmView, not "
                                "Model Runner V2's Mrv2View")
    v1_view = view or _view_for(runner, shape, tracker)
    installation = Installation(v1_view, release, shape)
    patches = installation.patches
    patches.stage(runner, "_update_states", _after_update_states(installation, v1_view, runner))
    patches.stage(runner, "_sample", _around_sample(installation, v1_view))
    patches.stage(drafter, "propose", _around_propose(installation, v1_view, shape.sample_index))
    if _takes_grammar_output(getattr(runner, "sample_tokens", None)):
        patches.stage(runner, "sample_tokens", _before_sample_tokens(installation, v1_view,
                                                                     runner))
    return _installed_on(runner, installation)


def _installed_on(runner: Any, installation: Installation) -> Installation:
    """Apply the staged wrappers (every check passed) and mark the runner."""
    installation.patches.apply()
    runner.__dict__[_ATTRIBUTE] = installation
    return installation


def uninstall(gpu_model_runner: Any) -> None:
    """Undo :func:`install` on this runner; a runner without it is left as it is."""
    installation = getattr(gpu_model_runner, "__dict__", {}).pop(_ATTRIBUTE, None)
    if installation is None:
        return
    installation.patches.undo()


@contextlib.contextmanager
def installed(gpu_model_runner: Any, **options: Any) -> Iterator[Installation]:
    """:func:`install` for the duration of a ``with`` block."""
    installation = install(gpu_model_runner, **options)
    try:
        yield installation
    finally:
        uninstall(gpu_model_runner)


def installation_of(gpu_model_runner: Any) -> Installation | None:
    """The :class:`Installation` on a runner, or None."""
    found: Installation | None = getattr(gpu_model_runner, "__dict__", {}).get(_ATTRIBUTE)
    return found


def _release(version: str | None) -> str:
    """The release the runner is read as: ``version=``, else ``SPECGUARD_VLLM_VERSION``,
    else ``vllm.__version__``; a dev, rc or local build is read as its release."""
    if version is None:
        version = release_from_environment()
    if version is None:
        try:
            import vllm
        except ImportError as error:
            raise UnsupportedEngine(
                "vllm cannot be imported, so its version is unknown: pass version= or set "
                f"{ENV_VERSION}") from error
        version = str(getattr(vllm, "__version__", ""))
    try:
        release = release_of(version)
    except ValueError as error:
        raise UnsupportedEngine(f"vLLM reports its version as {version!r}, which names no "
                                f"release: pass version= or set {ENV_VERSION}") from error
    return release


def _refuse_unknown_runner(runner: Any) -> None:
    if not hasattr(runner, "input_batch"):
        raise UnsupportedEngine(
            f"{type(runner).__module__}.{type(runner).__name__} is neither the V1 "
            "GPUModelRunner (vllm.v1.worker.gpu_model_runner) nor Model Runner V2's "
            f"({MRV2_MODULE})")


def _install_model_runner_v2(runner: Any, release: str,
                             view: VllmView | Mrv2View | None) -> Installation:
    """Model Runner V2 (vLLM 0.24 on): see :mod:`specguard.adapters.engines.vllm.mrv2.install`."""
    speculator = getattr(runner, "speculator", None)
    if speculator is None:
        raise UnsupportedEngine(
            "this Model Runner V2 has no speculator: specguard checks the MTP/EAGLE "
            "boundaries and has nothing to check")
    shape = mrv2_shape(runner, speculator, release)
    if isinstance(view, VllmView):  # the scheduler's side given: MRV2's own around it
        view = Mrv2View(mtp_k=view.mtp_k, vocab_size=view.vocab_size, scheduler_view=view)
    hooks = Mrv2Hooks(view or mrv2_view(runner, release), runner)
    installation = Installation(hooks.view, release, shape)
    installation.patches.stage(runner, "prepare_inputs", hooks.after_prepare_inputs())
    installation.patches.stage(runner, "sample", hooks.around_sample())
    installation.patches.stage(speculator, "propose", hooks.around_propose())
    return _installed_on(runner, installation)


def _view_for(runner: Any, shape: RunnerShape, tracker: bool) -> VllmView:
    spec = runner.speculative_config
    model = getattr(runner, "model_config", None)
    vocab = model.get_vocab_size() if model is not None else runner.vocab_size
    scheduler = getattr(runner, "scheduler_config", None)
    asynchronous = bool(getattr(runner, "use_async_scheduling",
                                getattr(scheduler, "async_scheduling", False)))
    return VllmView(mtp_k=engine_count(getattr(spec, "num_speculative_tokens", None),
                                       "speculative_config.num_speculative_tokens"),
                    vocab_size=engine_count(vocab, "the model's vocabulary size"),
                    async_scheduling=asynchronous,
                    tracker=StepTracker() if tracker else None, version=shape.release,
                    masks_placeholders=shape.masks_placeholders)


def _after_update_states(installation: Installation, view: VllmView,
                         runner: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _update_states(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            output = inspect.signature(original).bind(*args, **kwargs).arguments[
                "scheduler_output"]
            installation.step = view.schedule(
                output, req_ids=list(runner.input_batch.req_ids))
            return result

        return _update_states

    return make


def _around_sample(installation: Installation,
                   view: VllmView) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _sample(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            step = installation.step
            sampled = getattr(result, "sampled_token_ids", None)
            if step is not None and sampled is not None:
                view.verified(step, sampled)
            return result

        return _sample

    return make


def _takes_grammar_output(method: Any) -> bool:
    """Whether ``method`` is vLLM's ``sample_tokens(grammar_output)`` (0.11.1 on)."""
    if not callable(method):
        return False
    try:
        return "grammar_output" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _num_logits(runner: Any) -> int | None:
    """Rows of the logits ``execute_model`` left for ``sample_tokens`` (metadata only: no
    value is read), or None where the runner's state does not hold them."""
    state = getattr(runner, "execute_model_state", None)
    logits = getattr(state, "logits", None)
    if logits is None and isinstance(state, tuple) and len(state) > 1:
        logits = state[1]  # 0.11.x: (scheduler_output, logits, spec_decode_metadata, ...)
    shape = getattr(logits, "shape", None)
    if shape is None or len(shape) != 2:
        return None
    rows = shape[0]
    return rows if type(rows) is int else None


def _before_sample_tokens(installation: Installation, view: VllmView,
                          runner: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def sample_tokens(*args: Any, **kwargs: Any) -> Any:
            step = installation.step
            if step is not None:
                grammar = signature.bind(*args, **kwargs).arguments.get("grammar_output")
                if grammar is not None:
                    view.logits_rows(step, grammar, num_logits=_num_logits(runner))
            return original(*args, **kwargs)

        return sample_tokens

    return make


def _around_propose(installation: Installation, view: VllmView,
                    sample_name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def propose(*args: Any, **kwargs: Any) -> Any:
            step = installation.step
            if step is not None:
                given = signature.bind(*args, **kwargs).arguments
                view.drafter_input(
                    step, target_token_ids=given["target_token_ids"],
                    target_positions=given["target_positions"],
                    next_token_ids=given["next_token_ids"],
                    last_token_indices=given.get(sample_name),
                    common_attn_metadata=given["common_attn_metadata"])
            result = original(*args, **kwargs)
            if step is not None and hasattr(result, "shape"):
                view.drafted(step, result)
            return result

        return propose

    return make
