"""The checks :func:`specguard.adapters.engines.vllm.install.install` puts on Model Runner V2.

MRV2's ``GPUModelRunner`` (``vllm.v1.worker.gpu.model_runner``, vLLM 0.24 on) hands over
each step through three methods, wrapped on the runner object (its class is left alone):

* ``prepare_inputs(scheduler_output, ...)`` (``batch_desc`` in 0.24; ``batch_req_state``,
  ``batch_desc`` and ``num_active_loras`` in 0.33) returns the ``InputBatch``: the
  ``SchedulerOutput`` is checked in its sorted batch order, then the ``InputBatch``
  (``Mrv2View.schedule``);
* ``sample(hidden_states, input_batch, grammar_output)`` returns the ``SamplerOutput``
  (``Mrv2View.verified``);
* ``speculator.propose(input_batch, ..., num_speculative_tokens=K_t)`` returns the
  ``(num_reqs, S)`` drafts stored on the device (``Mrv2View.drafted``).

Not covered, and skipped step by step (the step's hand-overs are not checked):
adaptive verification (the ``InputBatch``'s counts are upper bounds and the real spans
live on the device), prefill context parallelism (a rank-local batch) and runners that
sample no bonus token (diffusion).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specguard.adapters._install import engine_count
from specguard.adapters.engines.vllm.mrv2.view import Mrv2Batch, Mrv2View
from specguard.adapters.engines.vllm.view import VllmView

__all__ = ["MRV2_MODULE", "Mrv2Hooks", "is_model_runner_v2", "mrv2_view"]

#: The module of Model Runner V2's ``GPUModelRunner``.
MRV2_MODULE = "vllm.v1.worker.gpu.model_runner"
Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def is_model_runner_v2(runner: Any) -> bool:
    """Whether ``runner`` is MRV2's ``GPUModelRunner`` (by its class's module)."""
    return str(type(runner).__module__).startswith("vllm.v1.worker.gpu.")


def mrv2_view(runner: Any, release: str) -> Mrv2View:
    """A view for the runner's configuration (no step tracker: see :class:`Mrv2View`).
    Its scheduler view allows ``-1`` draft slots: MRV2 fills every slot from the
    request's device row, and what it embeds is checked as SG628."""
    mtp_k = engine_count(getattr(runner, "num_speculative_steps", None),
                         "GPUModelRunner.num_speculative_steps")
    vocab_size = engine_count(getattr(runner, "vocab_size", None), "GPUModelRunner.vocab_size")
    return Mrv2View(mtp_k=mtp_k, vocab_size=vocab_size, scheduler_view=VllmView(
        mtp_k=mtp_k, vocab_size=vocab_size, version=release, masks_placeholders=True))


@dataclass
class Mrv2Hooks:
    """The wrappers of one MRV2 runner, and the batch in flight between them."""

    view: Mrv2View
    runner: Any
    batch: Mrv2Batch | None = None
    """The checked batch in flight, or None when the step is not covered."""
    input_batch: Any = None
    """The ``InputBatch`` it was read from: ``sample`` and ``propose`` are checked only
    when handed that very object (dummy and warm-up batches are not)."""

    def covered(self) -> bool:
        """Whether this step runs a configuration the checks cover."""
        runner = self.runner
        if getattr(runner, "adaptive_verification", None) is not None:
            return False
        if getattr(runner, "pcp_manager", None) is not None:
            return False
        state = getattr(runner, "model_state", None)
        return getattr(state, "num_new_sampled_tokens_per_step", 1) == 1

    def _in_flight(self, signature: inspect.Signature, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Mrv2Batch | None:
        """The checked batch, when a call is handed the step's own ``InputBatch``."""
        if self.batch is None:
            return None
        try:
            given = signature.bind(*args, **kwargs).arguments.get("input_batch")
        except TypeError:  # the engine's own call failed the same way
            return None
        return self.batch if given is self.input_batch else None

    def after_prepare_inputs(self) -> Wrapper:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def prepare_inputs(scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
                input_batch = original(scheduler_output, *args, **kwargs)
                self.batch, self.input_batch = None, input_batch
                if self.covered():
                    self.batch = self.view.schedule(
                        input_batch, max_num_reqs=getattr(self.runner, "max_num_reqs", None),
                        scheduler_output=scheduler_output)
                return input_batch

            return prepare_inputs

        return make

    def around_sample(self) -> Wrapper:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            signature = inspect.signature(original)

            def sample(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                batch = self._in_flight(signature, args, kwargs)
                if batch is not None and isinstance(result, tuple) and result:
                    self.view.verified(batch, result[0])
                return result

            return sample

        return make

    def around_propose(self) -> Wrapper:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            signature = inspect.signature(original)

            def propose(*args: Any, **kwargs: Any) -> Any:
                drafts = original(*args, **kwargs)
                batch = self._in_flight(signature, args, kwargs)
                if batch is not None and hasattr(drafts, "shape"):
                    given = signature.bind(*args, **kwargs).arguments
                    if given.get("dummy_run", False) is True:
                        return drafts
                    proposed = given.get("num_speculative_tokens")
                    self.view.drafted(batch, drafts, num_speculative_tokens=(
                        self.view.mtp_k if proposed is None else proposed))
                return drafts

            return propose

        return make
