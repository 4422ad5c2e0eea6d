"""Guarded proxies: put contracts around an engine's scheduler and runner without editing them.

::

    scheduler = guard_scheduler(scheduler, AtomView(mtp_k=3, vocab_size=V, block_size=16))
    runner = guard_runner(runner, {"forward": {"batch": ScheduledBatch, "return": VerifyOutput}})

A proxy forwards every attribute read, write and delete to the wrapped object, reports
the wrapped object's class (so ``isinstance`` checks keep passing), and returns exactly
what the wrapped method returns. Only the named methods differ: their arguments and
results are checked first (by :func:`specguard.adapters.guard`'s rules), so a violating batch is
refused before the runner sees it. With the mode off when the proxy is made, the object
itself is returned: nothing to pay.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, SupportsIndex, TypeVar

from specguard.adapters._guard import guard
from specguard.contracts import Mode, current_config

__all__ = ["guard_runner", "guard_scheduler", "is_guarded", "unwrap"]

T = TypeVar("T")

_RETURN = "return"
_OWN = ("_sg_target", "_sg_methods", "_sg_cache")


class _Guarded:
    """Forwards everything to ``_sg_target``; the methods in ``_sg_methods`` are guarded."""

    __slots__ = _OWN

    def __init__(self, target: Any, methods: Mapping[str, Mapping[str, Any]]) -> None:
        object.__setattr__(self, "_sg_target", target)
        object.__setattr__(self, "_sg_methods", dict(methods))
        object.__setattr__(self, "_sg_cache", {})

    # isinstance(proxy, Engine) keeps holding. Read-only on purpose (a proxy is never
    # re-classed), so it differs from object's settable __class__.
    @property  # type: ignore[misc]
    def __class__(self) -> type:  # pyright: ignore[reportIncompatibleMethodOverride]
        return type(self._sg_target)

    def __getattr__(self, name: str) -> Any:
        if name in _OWN:  # a half-built proxy (copy, pickle): never recurse into itself
            raise AttributeError(name)
        value = getattr(self._sg_target, name)
        specs = self._sg_methods.get(name)
        if specs is None or not callable(value) or current_config().mode is Mode.OFF:
            return value
        function = getattr(value, "__func__", value)
        cached = self._sg_cache.get(name)
        if cached is None or cached[0] is not function:  # first use, or the method was replaced
            cached = (function, _guarded_method(value, specs))
            self._sg_cache[name] = cached
        return cached[1]

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._sg_target, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._sg_target, name)

    def __dir__(self) -> list[str]:
        return dir(self._sg_target)

    def __repr__(self) -> str:
        return repr(self._sg_target)

    def __str__(self) -> str:
        return str(self._sg_target)

    def __eq__(self, other: object) -> bool:
        return bool(self._sg_target == unwrap(other))

    def __hash__(self) -> int:
        return hash(self._sg_target)

    def __bool__(self) -> bool:
        return bool(self._sg_target)

    def __len__(self) -> int:
        return len(self._sg_target)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._sg_target)

    def __contains__(self, item: object) -> bool:
        return item in self._sg_target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sg_target(*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self._sg_target[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._sg_target[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._sg_target[key]

    def __enter__(self) -> Any:
        entered = _protocol(self._sg_target, "__enter__", "the context manager protocol")()
        # ``with engine as e`` usually binds the engine itself: keep binding the proxy.
        return self if entered is self._sg_target else entered

    def __exit__(self, *exc_info: Any) -> Any:
        return _protocol(self._sg_target, "__exit__", "the context manager protocol")(*exc_info)

    def __copy__(self) -> Any:
        """A proxy, with the same guarded methods, over a copy of the wrapped object."""
        return _Guarded(copy.copy(self._sg_target), self._sg_methods)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        """A proxy, with the same guarded methods, over a deep copy of the wrapped object."""
        return _Guarded(copy.deepcopy(self._sg_target, memo), self._sg_methods)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        raise TypeError(f"a guarded {type(self._sg_target).__name__} cannot be pickled; "
                        "pickle specguard.adapters.unwrap(proxy) and guard it again after "
                        "loading")


def _protocol(target: Any, method: str, protocol: str) -> Callable[..., Any]:
    """The target's own special method, or the TypeError Python raises without one."""
    bound = getattr(type(target), method, None)
    if bound is None:
        raise TypeError(f"{type(target).__name__!r} object does not support {protocol}")
    return functools.partial(bound, target)


def _guarded_method(method: Callable[..., Any], specs: Mapping[str, Any]) -> Callable[..., Any]:
    params = {name: spec for name, spec in specs.items() if name != _RETURN}
    if _RETURN in specs:
        return guard(specs[_RETURN], **params)(method)
    return guard(**params)(method)


def guard_runner(runner: T, methods: Mapping[str, Mapping[str, Any]]) -> T:
    """``runner`` with each named method's arguments (and ``"return"``) validated.

    ``methods`` maps a method name to ``{parameter: spec}``; a spec is a boundary class,
    a view (a callable such as an adapter) or a type hint, as for :func:`specguard.adapters.guard`.
    Names and specs are checked at once: a typo raises TypeError here.
    """
    for name, specs in methods.items():
        method = getattr(runner, name, None)
        if not callable(method):
            raise TypeError(f"guard_runner: {type(runner).__name__} has no method {name!r}")
        _guarded_method(method, specs)
    if current_config().mode is Mode.OFF:
        return runner
    return _Guarded(runner, methods)  # type: ignore[return-value]


def guard_scheduler(scheduler: T, view: Callable[[Any], Any], *, method: str = "schedule") -> T:
    """``scheduler`` whose ``method`` result passes through ``view`` before it is returned.

    ``view`` builds contract objects from the engine's own batch (e.g.
    :class:`specguard.adapters.engines.atom.view.AtomView`), which validates it: in strict
    mode a broken batch raises here, before any runner sees it. The result itself is
    returned unchanged.
    """
    return guard_runner(scheduler, {method: {_RETURN: view}})


def is_guarded(obj: object) -> bool:
    """Whether ``obj`` is a proxy made by this module."""
    return type(obj) is _Guarded


def unwrap(obj: T) -> T:
    """The wrapped object of a proxy; anything else is returned as it is."""
    return obj._sg_target if type(obj) is _Guarded else obj  # type: ignore[attr-defined]
