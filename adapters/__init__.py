"""specguard adapters: how engines adopt the contracts.

* :func:`guard` decorates a runner method; :func:`guard_runner` and
  :func:`guard_scheduler` put the same checks around objects you cannot edit;
* :class:`~adapters.atom.AtomView` and :class:`~adapters.vllm.VllmView` read ATOM's and
  vLLM's own objects by duck typing (neither engine is imported);
* :class:`~adapters.step_state.StepTracker` checks each step against the previous one;
* :mod:`adapters.snapshots` writes a violation to a file that ``specguard check``
  re-validates; :mod:`adapters.pytest_plugin` turns every guard on for a test run.

Knows the contracts; knows no runner.
"""

from adapters._guard import guard as guard
from adapters.atom import AtomView as AtomView
from adapters.proxies import guard_runner as guard_runner
from adapters.proxies import guard_scheduler as guard_scheduler
from adapters.proxies import is_guarded as is_guarded
from adapters.proxies import unwrap as unwrap
from adapters.step_state import StepLinks as StepLinks
from adapters.step_state import StepPlan as StepPlan
from adapters.step_state import StepState as StepState
from adapters.step_state import StepTracker as StepTracker
from adapters.vllm import VllmStep as VllmStep
from adapters.vllm import VllmView as VllmView

__all__ = [
    "AtomView",
    "StepLinks",
    "StepPlan",
    "StepState",
    "StepTracker",
    "VllmStep",
    "VllmView",
    "guard",
    "guard_runner",
    "guard_scheduler",
    "is_guarded",
    "unwrap",
]
