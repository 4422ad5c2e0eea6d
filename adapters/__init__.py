"""specguard adapters: how engines adopt the contracts.

* :func:`guard` decorates a runner method; :func:`guard_runner` and
  :func:`guard_scheduler` put the same checks around objects you cannot edit;
* :class:`~specguard.adapters.atom.AtomView` and
  :class:`~specguard.adapters.vllm.VllmView` read ATOM's and vLLM's own objects by
  duck typing (neither engine is imported);
* :mod:`~specguard.adapters.atom_install` puts them around a live ATOM ``ModelRunner`` in
  one call (``install_atom(runner)``, ``uninstall_atom(runner)``);
* :class:`~specguard.adapters.step_tracker.StepTracker` checks each step against the previous one;
* :func:`~specguard.adapters.ranks.check_ranks` checks that data-parallel ranks agree on
  each step, from one small all-gather of :class:`~specguard.adapters.ranks.RankStep` rows;
* :func:`install_vllm` / :func:`uninstall_vllm` (module
  :mod:`specguard.adapters.vllm_install`) put the vLLM checks on a live
  ``GPUModelRunner``, and :mod:`specguard.adapters.vllm_plugin` does it from vLLM's plugin
  hook when ``SPECGUARD_MODE`` is on;
* :mod:`specguard.adapters.snapshots` writes a violation to a file that ``specguard check``
  re-validates (an unreadable one is a :class:`SnapshotError`);
  :mod:`specguard.adapters.pytest_plugin` turns every guard on for a test run.

Knows the contracts; knows no runner.
"""

from specguard.adapters import atom_install as atom_install
from specguard.adapters._guard import guard as guard
from specguard.adapters.atom import AtomView as AtomView
from specguard.adapters.atom_install import install as install_atom
from specguard.adapters.atom_install import uninstall as uninstall_atom
from specguard.adapters.proxies import guard_runner as guard_runner
from specguard.adapters.proxies import guard_scheduler as guard_scheduler
from specguard.adapters.proxies import is_guarded as is_guarded
from specguard.adapters.proxies import unwrap as unwrap
from specguard.adapters.ranks import RankAgreement as RankAgreement
from specguard.adapters.ranks import RankStep as RankStep
from specguard.adapters.ranks import check_ranks as check_ranks
from specguard.adapters.snapshots import SnapshotError as SnapshotError
from specguard.adapters.step_tracker import StepLinks as StepLinks
from specguard.adapters.step_tracker import StepPlan as StepPlan
from specguard.adapters.step_tracker import StepState as StepState
from specguard.adapters.step_tracker import StepTracker as StepTracker
from specguard.adapters.vllm import VllmStep as VllmStep
from specguard.adapters.vllm import VllmView as VllmView
from specguard.adapters.vllm_install import UnsupportedVllm as UnsupportedVllm
from specguard.adapters.vllm_install import install as install_vllm
from specguard.adapters.vllm_install import installed as vllm_installed
from specguard.adapters.vllm_install import uninstall as uninstall_vllm

__all__ = [
    "AtomView",
    "RankAgreement",
    "RankStep",
    "SnapshotError",
    "StepLinks",
    "StepPlan",
    "StepState",
    "StepTracker",
    "UnsupportedVllm",
    "VllmStep",
    "VllmView",
    "check_ranks",
    "guard",
    "guard_runner",
    "guard_scheduler",
    "install_atom",
    "install_vllm",
    "is_guarded",
    "uninstall_atom",
    "uninstall_vllm",
    "unwrap",
    "vllm_installed",
]
