"""SGLang's ``sglang.srt.plugins`` entry point: checks on with no code change.

``pip install specguard`` registers :func:`register` under SGLang 0.5.23's general plugin
group; SGLang's ``load_plugins()`` calls it in each of its processes (the scheduler's
among them) and then applies the hooks registered through its ``HookRegistry``. Then::

    SPECGUARD_MODE=strict python -m sglang.launch_server ... --speculative-algorithm EAGLE \\
        --speculative-eagle-topk 1 ...

installs :func:`specguard.adapters.engines.sglang.v2.install.install` on each
``EAGLEWorkerV2`` as it is built (an ``AFTER`` hook on its ``__init__``), in that mode.
The plugin is inert unless asked for: with ``SPECGUARD_MODE`` unset, empty or ``off`` it
registers nothing and raises nothing, whatever specguard's own default mode is
(``strict``, for code that calls the contracts), so installing specguard into an SGLang
environment changes no worker; ``SGLANG_PLUGINS`` can also leave it out by name
(``specguard``). It imports SGLang's ``HookRegistry`` only when asked for, inside SGLang's
own ``load_plugins``. A worker specguard does not know (a draft tree, adaptive
speculation, a pipeline stage without the draft) is refused by ``install``: under
``strict`` the worker stops with that error, under ``warn`` it is logged and the worker
runs unchecked. ``FrozenKVMTPWorkerV2`` (the ``FROZEN_KV_MTP`` algorithm) subclasses the
worker without calling its ``__init__``, so the hook does not reach it; its traffic is
not recorded, and ``install`` on such a worker is the caller's choice.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from specguard.contracts import Mode, current_config

__all__ = ["TARGET", "after_worker_init", "register", "requested"]

#: The hook's target: the overlap worker's constructor.
TARGET = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__"
_log = logging.getLogger("specguard")
_registered: list[bool] = []


def requested() -> bool:
    """Whether the environment asks for the checks: ``SPECGUARD_MODE`` set, and not off."""
    if not os.environ.get("SPECGUARD_MODE", "").strip():
        return False
    return current_config().mode is not Mode.OFF


def register() -> None:
    """SGLang's plugin hook: register :func:`after_worker_init` on ``EAGLEWorkerV2.__init__``
    through SGLang's ``HookRegistry`` when ``SPECGUARD_MODE`` asks for it (see
    :func:`requested`); else do nothing. Safe to call more than once."""
    if not requested() or _registered:
        return
    from sglang.srt.plugins.hook_registry import (  # pyright: ignore[reportMissingImports]
        HookRegistry,
        HookType,
    )

    HookRegistry.register(TARGET, after_worker_init, HookType.AFTER)
    _registered.append(True)


def after_worker_init(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
    """SGLang's ``AFTER`` hook on ``EAGLEWorkerV2.__init__`` (called with its result, None,
    then the constructor's arguments): install the checks on the new worker."""
    from specguard.adapters.engines.sglang.v2.install import UnsupportedEngine, install

    if getattr(worker, "draft_worker", None) is None:
        return  # a pipeline stage before the last: it neither drafts nor verifies
    try:
        install(worker)
    except UnsupportedEngine as error:
        if current_config().mode is Mode.STRICT:
            raise
        _log.warning("specguard: not checking this SGLang worker: %s", error)
