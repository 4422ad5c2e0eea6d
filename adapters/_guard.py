"""``@guard``: validate a runner method's named arguments and its return value.

Each named parameter maps to a spec:

* a boundary class (``ScheduledBatch``): the argument must be an instance, and it is
  re-validated, because engines mutate arrays in place after construction;
* a callable view (an adapter such as ``atom.scheduled_batch``): it builds a boundary
  object from the engine's own object, which validates it;
* any other type hint (``int``, ``list[int]``): checked by beartype.

Specs and parameter names are checked when the decorator runs, whatever the mode, so a
typo fails at import rather than never being noticed. With the mode off at that point the
decorator then returns the function itself: no wrapper, no cost, nothing for
``torch.compile`` to trace.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from beartype.door import TypeHint, is_bearable
from beartype.roar import BeartypeException

from specguard.contracts import (
    STATS,
    BoundaryObject,
    Config,
    Depth,
    Finding,
    Mode,
    current_config,
    describe,
    report,
    validate,
)

__all__ = ["guard"]

F = TypeVar("F", bound=Callable[..., Any])
_MISSING = object()
_RETURN = "return"


def _is_boundary_class(spec: object) -> bool:
    return isinstance(spec, type) and issubclass(spec, BoundaryObject)


def _is_view(spec: object) -> bool:
    return callable(spec) and not isinstance(spec, type) and not hasattr(spec, "__origin__")


def _spec_name(spec: Any) -> str:
    return spec.__name__ if isinstance(spec, type) else repr(spec)


def _check_spec(label: str, name: str, spec: Any) -> None:
    """Reject, at decoration, a spec that is neither a boundary class, a view nor a hint."""
    if _is_boundary_class(spec) or _is_view(spec):
        return
    try:
        TypeHint(spec)
    except BeartypeException as error:
        raise TypeError(f"@guard on {label}: {name}={spec!r} is not a type hint") from error


Check = Callable[[Any, Config], None]


def check_value(spec: Any, value: Any, label: str, name: str) -> None:
    """Validate one argument (or the return value) of ``label`` against its spec."""
    _checker(spec, label, name)(value, current_config())


def _checker(spec: Any, label: str, name: str) -> Check:
    """The check of one parameter, chosen once at decoration (calls pay no dispatch)."""
    if _is_boundary_class(spec):
        boundary: str = spec.__sg_boundary__
        clean_metadata = spec.__sg_plan__.compiled_fast_check()  # the exact class's plan
        metadata = Depth.METADATA

        def check_object(value: Any, config: Config) -> None:
            __tracebackhide__ = True
            # validate()'s own fast path, inlined for the exact class at metadata depth
            # (no value rule runs there): the always-on hand-over pays one predicate.
            if type(value) is spec and config.depth is metadata and clean_metadata(value):
                STATS.checks += 1
                return
            if not isinstance(value, spec):
                _wrong_type(spec, value, label, name, boundary)
                return
            # A violation is delivered with the object itself: the snapshot keeps it.
            validate(value, config=config)

        return check_object
    if _is_view(spec):
        return lambda value, config: spec(value)

    def check_hint(value: Any, config: Config) -> None:
        if not is_bearable(value, spec):
            _wrong_type(spec, value, label, name, "any boundary")

    return check_hint


def _wrong_type(spec: Any, value: Any, label: str, name: str, boundary: str) -> None:
    wanted = _spec_name(spec)
    report(label, [("SG001", Finding(
        f"expected {wanted}, got {describe(value)}", name,
        expected=wanted, actual=type(value).__name__))], boundary=boundary)


def _positions(fn: Callable[..., Any], names: list[str]) -> dict[str, int | None]:
    """Where each named parameter sits among the positional arguments (None: keyword-only)."""
    parameters = inspect.signature(fn).parameters
    missing = [n for n in names if n not in parameters]
    if missing:
        raise TypeError(f"@guard names parameters {missing} that {fn.__qualname__} lacks")
    variadic = [n for n in names if parameters[n].kind in (
        inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    if variadic:
        raise TypeError(f"@guard cannot check variadic parameters {variadic} of "
                        f"{fn.__qualname__}; name regular parameters")
    positional = [
        p.name for p in parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return {name: positional.index(name) if name in positional else None for name in names}


def guard(returns: Any = _MISSING, /, **params: Any) -> Callable[[F], F]:
    """Decorate a method so its named arguments (and result) are validated.

    ``@guard(batch=ScheduledBatch)`` or ``@guard(VerifyOutput, batch=ScheduledBatch)``
    (the positional spec checks the return value). A name the function lacks, or a spec
    that is not a boundary class, a view or a type hint, raises TypeError at once.
    """

    def decorate(fn: F) -> F:
        if not callable(fn):  # a bare @guard: the function became `returns`
            spec = getattr(returns, "__qualname__", repr(returns))
            raise TypeError(
                f"@guard was used without arguments on {spec}, which is then called with a "
                f"{type(fn).__name__}: name what to check, e.g. @guard(batch=ScheduledBatch) "
                "or @guard(VerifyOutput) for the return value")
        label = fn.__qualname__
        positions = _positions(fn, list(params))
        for name, spec in params.items():
            _check_spec(label, name, spec)
        if returns is not _MISSING:
            _check_spec(label, _RETURN, returns)
            if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
                raise TypeError(f"@guard cannot check what the generator {label} yields; "
                                "guard the function that consumes it, or drop the return spec")
        if current_config().mode is Mode.OFF:
            _note_unchecked(label)
            return fn
        wrap = _wrap_async if inspect.iscoroutinefunction(fn) else _wrap
        return cast(F, wrap(fn, label, params, positions, returns))

    return decorate


def _wrap(
    fn: Callable[..., Any], label: str, params: Mapping[str, Any],
    positions: Mapping[str, int | None], returns: Any,
) -> Callable[..., Any]:
    checks, check_result = _checkers(label, params, positions, returns)
    if len(checks) == 1 and check_result is None:
        name = next(iter(params))
        return _wrap_one(fn, name, positions[name], checks[0][2], params[name])
    off = Mode.OFF

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        config = current_config()
        if config.mode is not off:
            # _check_arguments, inlined: a call costs as much as the loop on this hot path.
            for name, index, check in checks:
                if name in kwargs:
                    check(kwargs[name], config)
                elif index is not None and index < len(args):
                    check(args[index], config)
        result = fn(*args, **kwargs)
        if check_result is not None:
            config = current_config()
            if config.mode is not off:
                check_result(result, config)
        return result

    guarded.__sg_guarded__ = fn  # type: ignore[attr-defined]
    return guarded


def _wrap_one(fn: Callable[..., Any], name: str, index: int | None, check: Check,
              spec: Any) -> Callable[..., Any]:
    """``_wrap`` for the commonest decoration, one checked argument and no result spec:
    no loop, no result handling, and for a boundary class ``check_object``'s fast path
    inline, so the always-on hand-over of a clean object pays one predicate call."""
    off, metadata = Mode.OFF, Depth.METADATA
    reach = sys.maxsize if index is None else index  # keyword-only: never positional
    if _is_boundary_class(spec):
        exact, clean = spec, spec.__sg_plan__.compiled_fast_check()
    else:
        exact, clean = _NEVER, _NEVER.clean

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        config = current_config()
        if config.mode is not off:
            if kwargs and name in kwargs:
                value = kwargs[name]
            elif reach < len(args):
                value = args[reach]
            else:
                return fn(*args, **kwargs)  # left to its default: nothing handed over
            if type(value) is exact and config.depth is metadata and clean(value):
                STATS.checks += 1
            else:
                check(value, config)
        # Without keywords (the commoner call), no empty mapping is unpacked.
        return fn(*args, **kwargs) if kwargs else fn(*args)

    guarded.__sg_guarded__ = fn  # type: ignore[attr-defined]
    return guarded


class _NEVER:
    """The type no argument has: specs other than boundary classes take ``check``."""

    @staticmethod
    def clean(value: Any) -> bool:
        """Never called: no argument is a ``_NEVER``."""
        return False


def _wrap_async(
    fn: Callable[..., Any], label: str, params: Mapping[str, Any],
    positions: Mapping[str, int | None], returns: Any,
) -> Callable[..., Any]:
    """``_wrap`` for ``async def``: the awaited result is checked, not the coroutine."""
    checks, check_result = _checkers(label, params, positions, returns)

    @functools.wraps(fn)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        config = current_config()
        if config.mode is not Mode.OFF:
            _check_arguments(checks, args, kwargs, config)
        result = await fn(*args, **kwargs)
        if check_result is not None:
            config = current_config()
            if config.mode is not Mode.OFF:
                check_result(result, config)
        return result

    guarded.__sg_guarded__ = fn  # type: ignore[attr-defined]
    return guarded


def _checkers(
    label: str, params: Mapping[str, Any], positions: Mapping[str, int | None], returns: Any,
) -> tuple[tuple[tuple[str, int | None, Any], ...], Any]:
    """Each parameter's check with where to find its argument, and the result's check."""
    checks = tuple((name, positions[name], _checker(spec, label, name))
                   for name, spec in params.items())
    return checks, None if returns is _MISSING else _checker(returns, label, _RETURN)


def _check_arguments(checks: tuple[tuple[str, int | None, Any], ...], args: tuple[Any, ...],
                     kwargs: Mapping[str, Any], config: Any) -> None:
    for name, index, check in checks:
        if name in kwargs:
            check(kwargs[name], config)
        elif index is not None and index < len(args):
            check(args[index], config)


#: Functions decorated while the mode was off: they stay unchecked for the whole process.
UNCHECKED: set[str] = set()


def _note_unchecked(label: str) -> None:
    UNCHECKED.add(label)
