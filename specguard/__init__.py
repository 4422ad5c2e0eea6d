"""specguard: typed contracts between the scheduler and the model runner of MTP engines.

One import namespace, four layers, knowledge flowing one way::

    specguard.contracts   pure: boundary objects, the rule registry, violations, modes
        ↑
    specguard.adapters    decorators, guards, engine views (ATOM, vLLM), pytest plugin
        ↑
    specguard.runner      the reference MTP engine on torch (the ``engine`` extra)
        ↑
    specguard.benchmarks  what validation costs (needs the engine)

``specguard.cli`` sits on top and knows all four. In the repository the layers live in
top-level folders (``contracts/``, ``adapters/``, ``runner/``, ``benchmarks/``); the
build maps each onto its place under ``specguard`` (``package-dir`` in pyproject.toml).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("specguard")
except PackageNotFoundError:  # pragma: no cover - running from an unbuilt tree
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
