"""specguard adapters: how engines adopt the contracts.

Engine-neutral, in this folder:

* :func:`guard` decorates a runner method; :func:`guard_runner` and
  :func:`guard_scheduler` put the same checks around objects you cannot edit;
* :class:`~specguard.adapters.step_tracker.StepTracker` checks each step against the
  previous one;
* :func:`~specguard.adapters.ranks.check_ranks` checks that data-parallel ranks agree on
  each step, from one small all-gather of :class:`~specguard.adapters.ranks.RankStep` rows;
* :mod:`specguard.adapters.snapshots` writes a violation to a file that ``specguard check``
  re-validates (an unreadable one is a :class:`SnapshotError`);
  :mod:`specguard.adapters.corpus` reads and writes recorded engine traffic (an
  unreadable file is a :class:`CorpusError`);
  :mod:`specguard.adapters.pytest_plugin` turns every guard on for a test run.

One folder per engine under :mod:`specguard.adapters.engines`, each with the same shape
(:class:`EngineView`, an installer, its own range of rule codes; see :data:`ENGINES`):

* ATOM: :class:`AtomView`; :func:`install_atom` / :func:`uninstall_atom` put it around a
  live ``ModelRunner``;
* vLLM: :class:`VllmView` (the V1 runner) and :class:`Mrv2View` (Model Runner V2);
  :func:`install_vllm` / :func:`uninstall_vllm` put them on a live ``GPUModelRunner``,
  and :mod:`specguard.adapters.engines.vllm.plugin` does it from vLLM's plugin hook when
  ``SPECGUARD_MODE`` is on;
* SGLang 0.5.23: :class:`SglangV2View` (the overlap worker, ``EAGLEWorkerV2``), put on a
  live worker by :mod:`specguard.adapters.engines.sglang.v2.install` and by SGLang's
  plugin hook (:mod:`specguard.adapters.engines.sglang.v2.plugin`).

An installer refuses a runner it does not know with :class:`UnsupportedEngine`.
Knows the contracts; knows no runner.
"""

from specguard.adapters._guard import guard as guard
from specguard.adapters.corpus import CorpusError as CorpusError
from specguard.adapters.engines import ENGINES as ENGINES
from specguard.adapters.engines import Engine as Engine
from specguard.adapters.engines import EngineInstaller as EngineInstaller
from specguard.adapters.engines import EngineView as EngineView
from specguard.adapters.engines import UnsupportedEngine as UnsupportedEngine
from specguard.adapters.engines.atom.install import install as install_atom
from specguard.adapters.engines.atom.install import installed as atom_installed
from specguard.adapters.engines.atom.install import uninstall as uninstall_atom
from specguard.adapters.engines.atom.view import AtomView as AtomView
from specguard.adapters.engines.sglang.install import install as install_sglang
from specguard.adapters.engines.sglang.install import installed as sglang_installed
from specguard.adapters.engines.sglang.install import uninstall as uninstall_sglang
from specguard.adapters.engines.sglang.v2.view import SglangV2View as SglangV2View
from specguard.adapters.engines.sglang.view import SglangView as SglangView
from specguard.adapters.engines.vllm.install import install as install_vllm
from specguard.adapters.engines.vllm.install import installed as vllm_installed
from specguard.adapters.engines.vllm.install import uninstall as uninstall_vllm
from specguard.adapters.engines.vllm.mrv2.view import Mrv2View as Mrv2View
from specguard.adapters.engines.vllm.view import VllmStep as VllmStep
from specguard.adapters.engines.vllm.view import VllmView as VllmView
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

__all__ = [
    "ENGINES",
    "AtomView",
    "CorpusError",
    "Engine",
    "EngineInstaller",
    "EngineView",
    "Mrv2View",
    "RankAgreement",
    "RankStep",
    "SglangV2View",
    "SglangView",
    "SnapshotError",
    "StepLinks",
    "StepPlan",
    "StepState",
    "StepTracker",
    "UnsupportedEngine",
    "VllmStep",
    "VllmView",
    "atom_installed",
    "check_ranks",
    "guard",
    "guard_runner",
    "guard_scheduler",
    "install_atom",
    "install_sglang",
    "install_vllm",
    "is_guarded",
    "sglang_installed",
    "uninstall_atom",
    "uninstall_sglang",
    "uninstall_vllm",
    "unwrap",
    "vllm_installed",
]
