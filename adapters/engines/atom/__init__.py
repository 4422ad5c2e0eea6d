"""ATOM (ROCm/ATOM): its MTP ``ScheduledBatch`` read by duck typing, and its installer.

* :class:`~specguard.adapters.engines.atom.view.AtomView` reads the scheduler's batch,
  the rejection sampler's rows and the MTP head's proposals;
* :mod:`~specguard.adapters.engines.atom.install` puts a view around a live
  ``ModelRunner`` in one call;
* :class:`~specguard.adapters.engines.atom.layout.AtomLayout` holds ATOM's own layout
  assumptions, rules SG611-SG613 (ATOM's range is SG610-SG619).
"""

from specguard.adapters.engines._interface import Engine, register_engine
from specguard.adapters.engines.atom import install
from specguard.adapters.engines.atom.layout import AtomLayout as AtomLayout
from specguard.adapters.engines.atom.view import LAYOUTS as LAYOUTS
from specguard.adapters.engines.atom.view import AtomView as AtomView

ENGINE = register_engine(Engine(
    name="atom", title="ATOM", codes=range(610, 620), views=(AtomView,), installer=install,
    corpus={"atom": "ATOM"}, guide="ATOM"))

__all__ = ["ENGINE", "LAYOUTS", "AtomLayout", "AtomView", "install"]
