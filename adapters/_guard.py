"""``@guard``: validate a runner method's named arguments and its return value.

Each named parameter maps to a spec:

* a boundary class (``ScheduledBatch``): the argument must be an instance, and it is
  re-validated, because engines mutate arrays in place after construction;
* a callable view (an adapter such as ``atom.scheduled_batch``): it builds a boundary
  object from the engine's own object, which validates it;
* any other type hint (``int``, ``list[int]``): checked by beartype.

With the mode off when the decorator runs, it returns the function itself: no wrapper,
no cost, nothing for ``torch.compile`` to trace.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from beartype.door import is_bearable

from contracts import BoundaryObject, Finding, Mode, current_config, validate
from contracts._core._validate import report

__all__ = ["guard"]

F = TypeVar("F", bound=Callable[..., Any])
_MISSING = object()


def _is_boundary_class(spec: object) -> bool:
    return isinstance(spec, type) and issubclass(spec, BoundaryObject)


def _is_view(spec: object) -> bool:
    return callable(spec) and not isinstance(spec, type) and not hasattr(spec, "__origin__")


def check_value(spec: Any, value: Any, where: str) -> Any:
    """Validate one argument or return value against its spec; return what the method sees."""
    if _is_boundary_class(spec):
        if not isinstance(value, spec):
            report(spec.__name__, [("SG001", Finding(
                f"{where} must be a {spec.__name__}, got {type(value).__name__}", where,
                expected=spec.__name__, actual=type(value).__name__))])
            return value
        validate(value)
        return value
    if _is_view(spec):
        spec(value)
        return value
    if not is_bearable(value, spec):
        report(where, [("SG001", Finding(
            f"{where} must be {spec!r}, got {type(value).__name__}", where,
            expected=repr(spec), actual=type(value).__name__))])
    return value


def _positions(fn: Callable[..., Any], names: list[str]) -> dict[str, int | None]:
    parameters = list(inspect.signature(fn).parameters.values())
    positional = {
        p.name: i for i, p in enumerate(parameters)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    missing = [n for n in names if n not in {p.name for p in parameters}]
    if missing:
        raise TypeError(f"@guard names parameters {missing} that {fn.__qualname__} lacks")
    return {name: positional.get(name) for name in names}


def guard(returns: Any = _MISSING, /, **params: Any) -> Callable[[F], F]:
    """Decorate a method so its named arguments (and result) are validated.

    ``@guard(batch=ScheduledBatch)`` or ``@guard(VerifyOutput, batch=ScheduledBatch)``
    (the positional spec checks the return value).
    """

    def decorate(fn: F) -> F:
        if current_config().mode is Mode.OFF:
            return fn
        positions = _positions(fn, list(params))
        label = fn.__qualname__

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            if current_config().mode is not Mode.OFF:
                for name, spec in params.items():
                    value = _argument(args, kwargs, name, positions[name])
                    if value is not _MISSING:
                        check_value(spec, value, f"{label}({name})")
            result = fn(*args, **kwargs)
            if returns is not _MISSING and current_config().mode is not Mode.OFF:
                check_value(returns, result, f"{label} return value")
            return result

        guarded.__sg_guarded__ = fn  # type: ignore[attr-defined]
        return cast(F, guarded)

    return decorate


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], name: str, index: int | None) -> Any:
    if name in kwargs:
        return kwargs[name]
    if index is not None and index < len(args):
        return args[index]
    return _MISSING


