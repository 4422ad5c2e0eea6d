"""vLLM's ``vllm.general_plugins`` entry point: checks on with no code change.

``pip install specguard`` registers :func:`register` under vLLM's plugin group; vLLM calls
it in every process at start-up. Then::

    SPECGUARD_MODE=strict vllm serve ... --speculative-config '{"method": "mtp", ...}'

installs :func:`specguard.adapters.engines.vllm.install.install` on each ``GPUModelRunner``
as it is built, in that mode. The plugin is inert unless asked for: with
``SPECGUARD_MODE`` unset, empty or ``off`` it wraps nothing and raises nothing, whatever
the mode specguard's own default is (``strict``, for code that calls the contracts), so
installing specguard into a vLLM environment, even as a test dependency, changes no
worker. ``SPECGUARD_VLLM_VERSION=<release>`` tells it which release the code is when
``vllm.__version__`` does not (a fork's build); a value that names no release is a
``ConfigError`` at start-up, as a bad ``SPECGUARD_MODE`` is. It imports nothing of
vLLM's when it is called: it waits for vLLM to import a runner module
(only worker processes do): ``vllm.v1.worker.gpu_model_runner``, or Model Runner V2's
``vllm.v1.worker.gpu.model_runner``, whichever the engine runs. It then wraps that
module's ``GPUModelRunner.__init__`` so that each new runner gets its checks. A runner
specguard does not know (another release, no speculative decoding) is refused by
``install``: under ``strict`` the worker stops with that error, under ``warn`` it is
logged and the runner runs unchecked.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from specguard.contracts import Mode, current_config

__all__ = ["RUNNER_MODULE", "RUNNER_MODULES", "patch_runner_class", "register", "requested"]

RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
#: Every module whose ``GPUModelRunner`` is checked: vLLM V1's, and Model Runner V2's.
RUNNER_MODULES = (RUNNER_MODULE, "vllm.v1.worker.gpu.model_runner")
_PATCHED = "_specguard_patched_init"
_log = logging.getLogger("specguard")


def requested() -> bool:
    """Whether the environment asks for the checks: ``SPECGUARD_MODE`` set, and not off."""
    if not os.environ.get("SPECGUARD_MODE", "").strip():
        return False
    return current_config().mode is not Mode.OFF


def register() -> None:
    """vLLM's plugin hook: arrange for every ``GPUModelRunner`` to be checked, when
    ``SPECGUARD_MODE`` asks for it (see :func:`requested`); else do nothing. Safe to call
    more than once (vLLM may)."""
    if not requested():
        return
    from specguard.adapters.engines.vllm.release import release_from_environment

    release_from_environment()  # a bad override stops start-up here, with its reason
    for name in RUNNER_MODULES:  # already imported: patched now
        module = sys.modules.get(name)
        if module is not None:
            patch_runner_class(module)
    if not any(isinstance(finder, _RunnerFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RunnerFinder())


def patch_runner_class(module: ModuleType) -> bool:
    """Wrap ``module.GPUModelRunner.__init__`` to install the checks on each new runner;
    False when the module has no such class or it is wrapped already."""
    cls = getattr(module, "GPUModelRunner", None)
    if cls is None or getattr(cls.__init__, _PATCHED, False):
        return False
    original = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _install(self)

    setattr(__init__, _PATCHED, True)
    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__init__ = __init__
    return True


def _install(runner: Any) -> None:
    from specguard.adapters.engines.vllm.install import UnsupportedEngine, install
    from specguard.adapters.engines.vllm.mrv2.install import is_model_runner_v2

    if getattr(runner, "speculative_config", None) is None:
        return  # no drafts, nothing of specguard's to check
    if is_model_runner_v2(runner) and getattr(runner, "speculator", None) is None:
        return  # Model Runner V2 before the last pipeline stage: it neither samples nor drafts
    try:
        install(runner)
    except UnsupportedEngine as error:
        if current_config().mode is Mode.STRICT:
            raise
        _log.warning("specguard: not checking this vLLM runner: %s", error)


class _RunnerFinder(importlib.abc.MetaPathFinder):
    """Patches the runner module right after vLLM imports it (and nothing else)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in RUNNER_MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        patch_runner_class(module)
