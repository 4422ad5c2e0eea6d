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
build maps each onto its place under ``specguard`` (``package-dir`` in pyproject.toml),
and a link in this folder leads to each, so the checkout reads as the installed package.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__: str  # declared only: bound by __getattr__ on first use


def __getattr__(name: str) -> str:
    """``__version__``, read from the package metadata on first use: importlib.metadata
    costs more than the rest of ``import specguard.contracts``, which never needs it."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("specguard")
    except PackageNotFoundError:  # pragma: no cover - running from an unbuilt tree
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
