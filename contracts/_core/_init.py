"""The constructor of a boundary class: each field set through its slot, then validation.

A frozen dataclass's ``__init__`` sets every field with ``object.__setattr__(self, name,
value)``, which looks the name up on the type again for each field. A boundary object
is built once per hand-over, with five to twenty fields, between model forwards; its
slots are known when the class is made, so the generated constructor calls each slot's
own setter instead (about a third less per field). It takes the same keyword-only
parameters with the same defaults, then calls ``__post_init__`` (validation), as the
dataclass's does; a class with a field it does not handle that way (a default factory,
a field left out of ``__init__``, one without a slot of its own) keeps the dataclass's
constructor.

The source is registered with :mod:`linecache` (``register_source``), as the metadata
checks are: ``inspect.getsource`` and tracebacks show it.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

from specguard.contracts._core._metadata import register_source

__all__ = ["install_slot_init"]


def _slot(cls: type, name: str) -> Any:
    """The member descriptor of slot ``name`` on ``cls`` or a base, or None."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found if isinstance(found, types.MemberDescriptorType) else None
    return None


def install_slot_init(cls: type) -> bool:
    """Give the frozen, slotted, keyword-only dataclass ``cls`` a constructor that sets
    its fields through their slots; False (``cls`` untouched) where one field is not
    handled that way."""
    fields = dataclasses.fields(cls)
    namespace: dict[str, Any] = {}
    parameters, body = [], []
    for i, spec in enumerate(fields):
        slot = _slot(cls, spec.name)
        if not spec.init or not spec.kw_only or slot is None \
                or spec.default_factory is not dataclasses.MISSING:
            return False
        if spec.default is dataclasses.MISSING:
            parameters.append(spec.name)
        else:
            namespace[f"_default_{i}"] = spec.default
            parameters.append(f"{spec.name}=_default_{i}")
        namespace[f"_set_{i}"] = slot.__set__
        body.append(f"    _set_{i}(self, {spec.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = f"def __init__(self, *, {', '.join(parameters)}):" if parameters \
        else "def __init__(self):"
    lines = [signature, *(body or ["    pass"])]
    code = compile("\n".join(lines), register_source(cls.__name__, lines, "constructor"),
                   "exec")
    exec(code, namespace)
    init = namespace["__init__"]
    original = cls.__init__  # type: ignore[misc]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    if hasattr(init.__code__, "co_qualname"):  # 3.11+: what a TypeError about it names
        init.__code__ = init.__code__.replace(co_qualname=init.__qualname__)
    init.__annotations__ = dict(getattr(original, "__annotations__", {}))
    init.__doc__ = original.__doc__
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[misc]
    return True
