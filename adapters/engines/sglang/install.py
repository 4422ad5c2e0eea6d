"""Putting SGLang's checks on a live worker: 0.5.23's ``EAGLEWorkerV2`` is
:mod:`specguard.adapters.engines.sglang.v2.install`."""

from specguard.adapters.engines.sglang.v2.install import Installation as Installation
from specguard.adapters.engines.sglang.v2.install import UnsupportedEngine as UnsupportedEngine
from specguard.adapters.engines.sglang.v2.install import install as install
from specguard.adapters.engines.sglang.v2.install import installation_of as installation_of
from specguard.adapters.engines.sglang.v2.install import installed as installed
from specguard.adapters.engines.sglang.v2.install import uninstall as uninstall

__all__ = ["Installation", "UnsupportedEngine", "install", "installation_of", "installed",
           "uninstall"]
