"""The engines specguard adapts, one folder each, behind one interface.

:mod:`~specguard.adapters.engines._interface` states what an engine provides (its views'
hand-overs, its installer, its range of rule codes) and keeps :data:`ENGINES`. Every
package in this folder is an engine: importing this package imports each of them, and
each registers itself, so adding an engine adds a folder and edits no list.
"""

import importlib
import pkgutil

from specguard.adapters.engines._interface import ENGINES as ENGINES
from specguard.adapters.engines._interface import Engine as Engine
from specguard.adapters.engines._interface import EngineInstaller as EngineInstaller
from specguard.adapters.engines._interface import EngineView as EngineView
from specguard.adapters.engines._interface import UnsupportedEngine as UnsupportedEngine
from specguard.adapters.engines._interface import engine_of as engine_of
from specguard.adapters.engines._interface import register_engine as register_engine

for _found in pkgutil.iter_modules(__path__):
    if _found.ispkg and not _found.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_found.name}")

__all__ = ["ENGINES", "Engine", "EngineInstaller", "EngineView", "UnsupportedEngine",
           "engine_of", "register_engine"]
