"""Delivery: the one way a violation leaves specguard.

Every route that finds violations hands them to :func:`deliver`: ``validate`` (a boundary
object's construction, a re-validation, a guard's argument), :func:`report` (findings
made outside ``validate``: the engine views, ``DraftTokens.from_mapping``, a guard's
argument of the wrong type) and ``flush_deferred`` (device verdicts read one step late).
Delivery then, in this order and nowhere else:

1. names each seq by the engine's own id, when the code around the report entered a
   :class:`DeliveryContext` with names (``request 'a': ...``);
2. counts the violations (``STATS.violations``), once;
3. tells every listener, in the order they were added, with a :class:`Delivery`: the
   violations, the mode and what the route knows (the object validated, the context).
   Warn mode's log is the first listener; ``specguard.adapters`` adds the snapshot
   writer, which notes where it kept the object (``Delivery.kept_at``);
4. in strict mode raises :class:`ContractViolation` (:class:`DeferredViolation` for
   device verdicts), whose ``next:`` line names the kept object. In warn mode it
   returns: the log was a listener.

With mode off nothing is checked, so nothing gets here. A context costs a ContextVar set
and reset per block; nothing in it is read until a violation is delivered.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar, Token
from typing import Any, NamedTuple, TypeVar, overload

from specguard.contracts._core._config import Collect, Mode, current
from specguard.contracts._core._errors import ContractViolation, DeferredViolation
from specguard.contracts._core._registry import REGISTRY
from specguard.contracts._core._stats import STATS
from specguard.contracts._core._violation import Finding, Violation
from specguard.contracts._core._warn import log_warnings

__all__ = ["About", "Delivery", "DeliveryContext", "Listener", "deliver", "listen",
           "listening", "report"]


T = TypeVar("T")

_CONTEXT: ContextVar[DeliveryContext | None] = ContextVar("specguard_delivery", default=None)


class DeliveryContext:
    """What the code around a report knows that the report does not, for the block it
    is entered for (``with DeliveryContext(...):``, in this thread or asyncio task).

    ``names[i]`` is the engine's id of seq id ``i`` (adapters whose engine keys requests
    by strings use batch positions as seq ids): a violation of that seq is delivered
    with its reason prefixed ``request 'a': ``. ``object_type``, ``fields`` and ``state``
    describe the boundary object the block builds (its type name, what it is built
    from, the previous step's state it is checked against); ``lazy_fields``, when
    given, is called for the fields only if a listener asks for them, and ``fields``
    stands in when it raises. A listener that keeps objects (the snapshot writer) reads
    them through :meth:`Delivery.about`.

    Contexts nest: names are the innermost context's, the object the innermost that
    describes one. A context object is entered by one block at a time (and may be
    entered again once it ends): with ``with``, or on a hot path with :meth:`construct`
    or :meth:`run`, which do the same without the two calls of ``with``.
    """

    __slots__ = ("_token", "fields", "lazy_fields", "names", "object_type", "state")

    def __init__(self, names: Sequence[str] | None = None, object_type: str | None = None,
                 fields: Mapping[str, Any] | None = None, state: object | None = None,
                 lazy_fields: Callable[[], Mapping[str, Any]] | None = None) -> None:
        self.names = names
        self.object_type = object_type
        self.fields = fields
        self.state = state
        self.lazy_fields = lazy_fields

    def __enter__(self) -> DeliveryContext:
        self._token = _CONTEXT.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _CONTEXT.reset(self._token)

    def construct(self, cls: Callable[..., T], fields: Mapping[str, Any]) -> T:
        """``cls(**fields)`` inside this context: ``with`` for the hand-over every adapter
        makes per object, at the cost of one ContextVar set and reset."""
        __tracebackhide__ = True
        self._token = token = _CONTEXT.set(self)
        try:
            return cls(**fields)
        finally:
            _CONTEXT.reset(token)

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` inside this context, as :meth:`construct` is."""
        __tracebackhide__ = True
        self._token = token = _CONTEXT.set(self)
        try:
            return function(*args)
        finally:
            _CONTEXT.reset(token)

    @property
    def outer(self) -> DeliveryContext | None:
        """The context this one was entered inside, or None."""
        token: Token[DeliveryContext | None] | None = getattr(self, "_token", None)
        if token is None or token.old_value is Token.MISSING:
            return None
        outer: DeliveryContext | None = token.old_value
        return outer

    def __repr__(self) -> str:
        names = "None" if self.names is None else f"<{len(self.names)} names>"
        return f"DeliveryContext(names={names}, object_type={self.object_type!r})"


class About(NamedTuple):
    """The object a delivery is about, as a listener that keeps it needs it."""

    type_name: str
    fields: Mapping[str, Any]
    state: object | None


class Delivery(Sequence[Violation]):
    """One report on its way out, as each listener is told of it.

    It is the sequence of its violations, so a listener written as
    ``listener(violations)`` keeps working; the rest is what the route knows.
    """

    __slots__ = ("context", "deferred", "kept_at", "mode", "obj", "subject", "violations")

    def __init__(self, subject: str, violations: tuple[Violation, ...], mode: Mode, *,
                 context: DeliveryContext | None = None, obj: object = None,
                 deferred: bool = False) -> None:
        self.subject = subject
        """The object (or method, or engine object) the violations were found on."""
        self.violations = violations
        """The violations, named by the context's names."""
        self.mode = mode
        """``Mode.STRICT`` (raised once every listener is told) or ``Mode.WARN`` (logged)."""
        self.context = context
        """The innermost :class:`DeliveryContext` around the report, or None."""
        self.obj = obj
        """The boundary object that was validated, when the route has one."""
        self.deferred = deferred
        """Whether these are device verdicts read one step late (``flush_deferred``)."""
        self.kept_at: str | None = None
        """Where a listener kept the object (a snapshot file), for the ``next:`` line."""

    def about(self) -> About | None:
        """The object the violations are about, or None when the route has none: the
        object validated, unless the innermost context that describes an object builds
        one of that type (then that context, which also knows the state and the fields
        to keep). Fields the context computes lazily are computed now."""
        context = self.context
        while context is not None and context.object_type is None:
            context = context.outer
        obj = self.obj
        if obj is not None and dataclasses.is_dataclass(obj) and (
                context is None or context.object_type != type(obj).__name__):
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
            return About(type(obj).__name__, fields, None)
        if context is None or context.object_type is None:
            return None
        kept = context.fields
        if context.lazy_fields is not None:
            try:
                kept = context.lazy_fields()
            except Exception:  # the violation being delivered matters more than its copy
                kept = context.fields
        return None if kept is None else About(context.object_type, kept, context.state)

    def __len__(self) -> int:
        return len(self.violations)

    @overload
    def __getitem__(self, index: int) -> Violation: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Violation]: ...
    def __getitem__(self, index: int | slice) -> Violation | Sequence[Violation]:
        return self.violations[index]

    def __iter__(self) -> Iterator[Violation]:
        return iter(self.violations)

    def __repr__(self) -> str:
        return (f"Delivery({self.subject!r}, codes={[v.code for v in self.violations]}, "
                f"mode={self.mode.value})")


#: What a listener is: called with each :class:`Delivery`; what it returns is ignored.
Listener = Callable[[Delivery], object]

# Warn mode's log is the first listener: it logs before any other hears of the delivery.
_listeners: list[Listener] = []
# pyright reads _warn's TYPE_CHECKING import of Delivery through the namespace link as
# a second class of the same name.
_listeners.append(log_warnings)  # pyright: ignore[reportArgumentType]


def listen(listener: Listener) -> Callable[[], None]:
    """Tell ``listener`` of every delivery from now on, in any thread, whatever the mode;
    returns the function that stops it. For a package that keeps every violation (the
    snapshot writer of ``specguard.adapters``); a block uses :func:`listening`."""
    _listeners.append(listener)

    def stop() -> None:
        with contextlib.suppress(ValueError):
            _listeners.remove(listener)

    return stop


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call ``listener(delivery)`` for every delivery made inside the block, in any thread.

    A :class:`Delivery` is the sequence of its violations, with the mode it was
    delivered in and what the route knows; a listener that takes the violations alone
    (``seen.extend``) works as it is. Listeners are told before a strict delivery
    raises, so they hear of violations that a caller then catches.
    """
    stop = listen(listener)
    try:
        yield
    finally:
        stop()


def deliver(subject: str, violations: Sequence[Violation], mode: Mode, *, obj: object = None,
            deferred: bool = False) -> None:
    """Name, count, tell every listener, then raise (strict) or return (warn).

    ``obj`` is the boundary object validated, when there is one. Device verdicts
    (``deferred``) are read at a sync point, outside the block that built their object:
    no context applies to them.
    """
    __tracebackhide__ = True
    context = None if deferred else _CONTEXT.get()
    found = tuple(violations)
    if context is not None and context.names:
        names = context.names
        found = tuple(_named(v, names) for v in found)
    STATS.violations += len(found)
    delivery = Delivery(subject, found, mode, context=context, obj=obj, deferred=deferred)
    for listener in tuple(_listeners):
        listener(delivery)
    if mode is Mode.STRICT:
        error = DeferredViolation if deferred else ContractViolation
        raise error.from_violations(subject, found, kept_at=delivery.kept_at)


def _named(violation: Violation, names: Sequence[str]) -> Violation:
    """The violation with its reason prefixed by the engine's id of its seq (its seq id,
    or its batch position when it has none)."""
    index = violation.seq_id if violation.seq_id is not None else violation.position
    if index is None or not 0 <= index < len(names):
        return violation
    return dataclasses.replace(violation, reason=f"request {names[index]!r}: {violation.reason}")


def report(
    subject: str, findings: Sequence[tuple[str, Finding]], *, boundary: str | None = None
) -> None:
    """Deliver findings made outside ``validate`` (e.g. by a constructor) by mode.

    ``boundary`` names the hand-over (default: each rule's own); with ``collect="first"``
    only the first finding is reported, as ``validate`` does.
    """
    config = current()
    if config.mode is Mode.OFF or not findings:
        return
    if config.collect is Collect.FIRST:
        findings = findings[:1]
    violations = [
        Violation.from_finding(f, code=code, title=REGISTRY[code].title,
                               boundary=boundary or REGISTRY[code].boundary.value,
                               subject=subject, bindings={})
        for code, f in findings
    ]
    __tracebackhide__ = True
    try:
        deliver(subject, violations, config.mode)
    except ContractViolation as error:  # cut here: the caller reported, not specguard
        raise error.with_traceback(None) from None
