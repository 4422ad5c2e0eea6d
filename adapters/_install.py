"""What every engine's installer shares: its error, and wrapping live methods all or none.

An installer puts specguard's checks on the methods of one live engine object (a runner,
its drafter, its sampler) without touching their classes. :class:`MethodPatches` stages
every method first and checks each one (it exists, it is callable, the object can hold a
wrapper of its own), and wraps nothing until all of them pass: a runner that cannot be
installed on is left exactly as it was. Each wrapper carries the original's name,
docstring and signature (``functools.update_wrapper``), so ``inspect.signature`` and the
engine's own introspection still see the method they knew.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from specguard.contracts import SpecguardError

Installer = TypeVar("Installer", bound=Callable[..., Any])

__all__ = ["MethodPatches", "UnsupportedEngine", "engine_count", "refusing_what_raises"]

Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]
_FROM_CLASS = object()


class UnsupportedEngine(SpecguardError):
    """An engine object whose shape specguard does not know, so it cannot be checked.

    Raised by the installers before anything is wrapped (the runner is left as it was):
    a method that is missing or has other parameters, an object that cannot hold a
    wrapper (``__slots__`` without ``__dict__``), a configuration value that is not what
    the engine documents (a count that is None, a bool or below 1), a runner of an
    unknown kind. The message names the engine, the object and what differs.
    """


UnsupportedEngine.__module__ = "specguard.adapters"


def refusing_what_raises(engine: str) -> Callable[[Installer], Installer]:
    """Make an installer refuse, with :class:`UnsupportedEngine`, an engine object whose
    own attributes raise while it is read (a property or a ``__getattr__`` raising
    something other than AttributeError): the installer reads before it wraps anything,
    so the object is left as it was, and what escapes is specguard's error naming the
    object and what it raised, not the object's own exception."""

    def decorate(install: Installer) -> Installer:
        @functools.wraps(install)
        def refusing(target: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return install(target, *args, **kwargs)
            except SpecguardError:
                raise
            except Exception as error:
                raise UnsupportedEngine(
                    f"cannot install on this {engine} ({type(target).__name__}): reading it "
                    f"raised {type(error).__name__}: {error}") from error

        return refusing  # type: ignore[return-value]

    return decorate


def engine_count(value: Any, where: str, *, minimum: int = 1) -> int:
    """``value`` as a count read from an engine's configuration, or UnsupportedEngine
    naming ``where``: a bool, None, a float or a number below ``minimum`` is no count."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UnsupportedEngine(f"{where} is {value!r}: specguard needs an integer >= "
                                f"{minimum} there")
    return int(value)


@dataclass
class MethodPatches:
    """The methods one installation wraps: staged, then applied together, then undone."""

    _staged: list[tuple[Any, str, Wrapper]] = field(default_factory=list)
    _applied: list[tuple[Any, str, Any]] = field(default_factory=list)

    def stage(self, target: Any, name: str, make: Wrapper) -> None:
        """Plan to replace ``target.name`` by ``make(target.name)``; check it can be done."""
        owner = type(target).__name__
        if not callable(getattr(target, name, None)):
            raise UnsupportedEngine(f"{owner} has no method {name}()")
        try:
            vars(target)
        except TypeError:
            raise UnsupportedEngine(
                f"{owner} keeps no attributes of its own (it has __slots__ and no __dict__), "
                f"so specguard cannot put its check on {owner}.{name}() without changing "
                "the class") from None
        self._staged.append((target, name, make))

    def apply(self) -> None:
        """Wrap every staged method; nothing was changed before this call."""
        for target, name, make in self._staged:
            original = getattr(target, name)
            self._applied.append((target, name, vars(target).get(name, _FROM_CLASS)))
            vars(target)[name] = functools.update_wrapper(make(original), original)
        self._staged.clear()

    def undo(self) -> None:
        """Put back every wrapped method as the object held it (or not) before."""
        for target, name, own in reversed(self._applied):
            if own is _FROM_CLASS:
                vars(target).pop(name, None)
            else:
                vars(target)[name] = own
        self._applied.clear()

    @property
    def wrapped(self) -> tuple[tuple[Any, str], ...]:
        """The objects and method names wrapped, in order."""
        return tuple((target, name) for target, name, _ in self._applied)
