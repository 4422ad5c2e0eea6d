"""Validation of one boundary object: the compiled metadata check, then value rules.

The order is fixed: metadata first (it is what makes value rules safe to run), then the
value rules of the depth (the essential ones by default, every one at full depth); what
they find is delivered (:mod:`._delivery`: raised or logged by mode), and with mode off
nothing is looked at.
No exception other than :class:`ContractViolation` leaves this module: a rule that
crashes on hostile input is reported as ``SG000`` instead of escaping as an IndexError.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import Any

import numpy as np

from specguard.contracts._core import _compiled
from specguard.contracts._core._arrays import describe
from specguard.contracts._core._clearance import clearance_for
from specguard.contracts._core._compiled import reads_in_place
from specguard.contracts._core._config import (
    Collect,
    Config,
    Depth,
    Mode,
    current,
    parse_setting,
)
from specguard.contracts._core._delivery import deliver
from specguard.contracts._core._errors import ContractViolation
from specguard.contracts._core._fields import ArrayField, FieldSpec
from specguard.contracts._core._metadata import compile_fast_check, metadata_findings
from specguard.contracts._core._registry import REGISTRY, Rule, rules_for
from specguard.contracts._core._stats import STATS
from specguard.contracts._core._values import (
    HOST_DEVICE_TYPES,
    ValueChecks,
    host_twin,
    on_host,
    plain_twin,
)
from specguard.contracts._core._violation import Finding, Violation

__all__ = ["Plan", "validate"]


#: A clearance's check, the rules it leaves, and its compiled half (or None).
_Cleared = tuple[Callable[[Any], bool], tuple["Rule", ...], Callable[[Any], "bool | None"] | None]


@dataclass
class Plan:
    """Everything compiled for one boundary class: its fields, fast check and rules."""

    subject: str
    fields: tuple[FieldSpec, ...]
    fast_check: Callable[[Any], bool] = None  # type: ignore[assignment]  # set below
    _rules: tuple[Rule, ...] | None = None
    _by_depth: dict[Depth, tuple[Rule, ...]] | None = None
    _names: tuple[str, ...] | None = None
    _anchor: str | None = None
    #: Per tuple of rules (a depth's own tuple, by identity, kept so that the id is not
    #: reused): the clearance's check and the rules it leaves, or None.
    _cleared: dict[int, tuple[tuple[Rule, ...], _Cleared | None]] = \
        dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.fast_check is None:
            self.fast_check = self._compiled_on_first_use()

    def _compiled_on_first_use(self) -> Callable[[Any], bool]:
        """A stand-in that generates the class's metadata predicate at its first call and
        puts it in its place: importing the contracts compiles no code."""

        def fast_check(obj: Any) -> bool:
            return self.compiled_fast_check()(obj)

        fast_check.__sg_stand_in__ = True  # type: ignore[attr-defined]
        return fast_check

    def compiled_fast_check(self) -> Callable[[Any], bool]:
        """The generated predicate itself (compiled now if it was not yet)."""
        if getattr(self.fast_check, "__sg_stand_in__", False):
            self.fast_check = compile_fast_check(self.fields, self.subject)
        return self.fast_check

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Value and cross-field rules, looked up once the defining module has loaded."""
        if self._rules is None:
            self._rules = rules_for(self.subject)
        return self._rules

    @property
    def by_depth(self) -> dict[Depth, tuple[Rule, ...]]:
        """The value rules a validation runs at each depth (none at metadata depth)."""
        if self._by_depth is None:
            self._by_depth = {
                Depth.METADATA: (),
                Depth.ESSENTIAL: tuple(r for r in self.rules if r.depth is Depth.ESSENTIAL),
                Depth.FULL: self.rules,
            }
        return self._by_depth

    def rule_target(self, obj: Any) -> Any:
        """What value rules read: ``obj``, or its twin of numpy views over CPU tensors."""
        if self._names is None:
            self._learn(obj)
        if self._anchor is None:
            return obj
        return host_twin(obj, self._anchor, self._names)  # type: ignore[arg-type]

    def cleared(self, rules: tuple[Rule, ...], obj: Any) -> tuple[Any, tuple[Rule, ...]]:
        """What value rules read of ``obj`` (clean metadata), and which of ``rules`` are
        left once the class's clearance has vouched for the others.

        The clearance reads numpy arrays: an object's own, or the numpy views of its CPU
        tensors (:meth:`rule_target`'s twin). Where its compiled half covers every rule,
        it reads CPU tensors in place first, and no view is made: between model forwards
        the first view of a tensor costs more than the kernel. Any answer but True, an
        error included, leaves every rule, and the rules explain.
        """
        entry = self._cleared_by(rules)
        if self._names is None:
            self._learn(obj)
        anchor = self._anchor
        if anchor is None:
            return obj, rules
        if entry is None:
            return host_twin(obj, anchor, self._names), rules  # type: ignore[arg-type]
        check, rest, compiled = entry
        first = getattr(obj, anchor)
        target = obj
        if type(first) is not np.ndarray:
            if compiled is not None and not rest and reads_in_place(type(first)) \
                    and on_host(first) and _says_yes(compiled, obj):
                return obj, ()
            target = host_twin(obj, anchor, self._names)  # type: ignore[arg-type]
            if type(getattr(target, anchor)) is not np.ndarray:
                return target, rules  # device tensors: the rules read them there
        return target, rest if _says_yes(check, target) else rules

    def cleared_at_once(self, rules: tuple[Rule, ...], obj: Any) -> bool:
        """Whether the compiled clearance vouches for every one of ``rules`` on ``obj``
        (clean metadata) in one call, reading its numpy arrays or CPU tensors where they
        lie: the hand-over of every step, with no step of :meth:`cleared` in between.

        False is no verdict: no compiled clearance covers them all (or none was looked up
        yet: the first validation of each depth takes :meth:`cleared`), the anchor is on a
        device, or the kernel declines, refuses or fails; :meth:`cleared` then decides.
        """
        cached = self._cleared.get(id(rules))
        if cached is None or cached[0] is not rules or cached[1] is None:
            return False
        _, rest, compiled = cached[1]
        anchor = self._anchor
        if rest or compiled is None or anchor is None:
            return False
        first = getattr(obj, anchor)
        kind = type(first)
        # torch.Tensor once the kernels were told it (reads_in_place), else None.
        if kind is not np.ndarray and (kind is not _compiled._TENSOR or not first.is_cpu
                                       or "cpu" not in HOST_DEVICE_TYPES):
            return False
        try:
            return compiled(obj) is True
        except Exception:  # the full path's rules will say what is wrong
            return False

    def _cleared_by(self, rules: tuple[Rule, ...]) -> _Cleared | None:
        cached = self._cleared.get(id(rules))
        if cached is None or cached[0] is not rules:
            cached = self._cleared[id(rules)] = (rules, self._clearance_of(rules))
        return cached[1]

    def _clearance_of(self, rules: tuple[Rule, ...]) -> _Cleared | None:
        found = clearance_for(self.subject)
        if found is None or not found.covers <= {r.code for r in rules}:
            return None  # a depth that runs only some of its rules runs them alone
        return (found.check, tuple(r for r in rules if r.code not in found.covers),
                found.compiled)

    def for_subclass(self) -> Plan:
        """The same checks for a subclass, with caches of its own."""
        return Plan(self.subject, self.fields)

    def plain_target(self, obj: Any) -> Any:
        """What value rules read after the metadata slow path: no ndarray subclasses."""
        if self._names is None:
            self._learn(obj)
        return plain_twin(obj, self._names)  # type: ignore[arg-type]

    def _learn(self, obj: Any) -> None:
        self._names = tuple(f.name for f in dataclasses.fields(obj))
        # The first required array: with clean metadata it speaks for every array.
        self._anchor = next((s.name for s in self.fields
                             if isinstance(s, ArrayField) and not s.optional), None)


def _says_yes(check: Callable[[Any], bool | None], target: Any) -> bool:
    """Whether a clearance answers True on ``target``; an error is no answer."""
    try:
        return check(target) is True
    except Exception:  # the rules themselves will say what is wrong
        return False


def _violation(
    obj: Any, plan: Plan, code: str, finding: Finding, bindings: dict[str, int]
) -> Violation:
    rule = REGISTRY[code]
    finding = _locate(obj, finding)
    return Violation.from_finding(
        finding,
        code=code,
        title=rule.title,
        boundary=getattr(type(obj), "__sg_boundary__", rule.boundary.value),
        subject=plan.subject,
        bindings=bindings,
    )


def _locate(obj: Any, finding: Finding) -> Finding:
    """Fill in the seq id and batch position a rule could not see, when cheap and safe."""
    owner = getattr(obj, "_sg_owner", None)
    if owner is None or (finding.seq_id is not None and finding.position is not None):
        return finding
    try:
        position, seq_id = owner(finding.position, finding.token)
    except Exception:  # the object is already known to be broken; keep what we have
        return finding
    return dataclasses.replace(
        finding,
        position=finding.position if finding.position is not None else position,
        seq_id=finding.seq_id if finding.seq_id is not None else seq_id,
    )


def _metadata(
    obj: Any, plan: Plan, first_only: bool
) -> tuple[list[Violation], set[str], dict[str, int]]:
    findings, bindings = metadata_findings(obj, plan.fields, plan.subject, first_only=first_only)
    violations = [_violation(obj, plan, code, f, bindings) for code, f in findings]
    return violations, {f.field for _, f in findings if f.field}, bindings


def _crash(rule: Rule, error: Exception) -> Finding:
    """The SG000 finding of a rule that raised instead of answering."""
    reason = f"check {rule.code} could not evaluate: {type(error).__name__}: {error}"
    return Finding(reason)


def _value_violations(
    obj: Any, plan: Plan, rules: tuple[Rule, ...], config: Config, skip: Set[str],
    bindings: dict[str, int] | None,
) -> list[Violation]:
    # The hot loop of full depth: no helper call and no allocation per rule, since a
    # try block costs nothing until something raises.
    # Clean metadata guarantees one backend and device: only then may rules read views.
    if bindings is None:
        target, rules = plan.cleared(rules, obj)
        if not rules:  # the clearance vouched for every rule: nothing to read through
            return []
    else:
        target = plan.plain_target(obj)
    values = ValueChecks(config, plan.subject)
    found: list[Violation] = []
    for rule in rules:
        if skip and rule.fields & skip:
            continue
        values.rule = code = rule.code
        try:
            finding = rule.check(target, values)  # type: ignore[misc]
        except ContractViolation:
            raise
        except Exception as error:  # a rule must never turn bad input into a foreign error
            code, finding = "SG000", _crash(rule, error)
        if finding is not None:
            if bindings is None:  # clean objects never pay for the bindings
                _, bindings = metadata_findings(obj, plan.fields, plan.subject, first_only=False)
            found.append(_violation(obj, plan, code, finding, bindings))
            if config.collect is Collect.FIRST:
                break
    values.finish()
    return found


def validate(
    obj: Any, *, depth: Depth | str | None = None, config: Config | None = None
) -> list[Violation]:
    """Check ``obj`` under the current mode; raise, log or return its violations.

    Returns the violations found (empty when clean or when the mode is off), which is
    what warn mode and tools that inspect violations want. What it finds is delivered
    with ``obj``, so a listener can keep the object.
    """
    __tracebackhide__ = True  # pytest shows the caller's frame, not specguard's
    config = config or current()
    if config.mode is Mode.OFF:
        return []
    plan: Plan | None = getattr(type(obj), "__sg_plan__", None)
    if plan is None:
        return _not_a_boundary_object(obj, config)
    STATS.checks += 1
    by_depth = plan._by_depth or plan.by_depth
    if depth is None:
        rules = by_depth[config.depth]
    else:
        # Depth is a str enum: "full" finds Depth.FULL's entry; other spellings are parsed.
        found = by_depth.get(depth) if isinstance(depth, str) else None  # type: ignore[call-overload]
        rules = by_depth[parse_setting(Depth, depth, "depth")] if found is None else found
    if plan.fast_check(obj):
        # The hand-over's common case: clean metadata, and at the default depth a rule or
        # two (none at metadata depth). Nothing is allocated for it.
        if not rules or plan.cleared_at_once(rules, obj):
            return []
        violations = _value_violations(obj, plan, rules, config, _NO_SKIP, None)
    else:
        violations, skip, bindings = _metadata(obj, plan, config.collect is Collect.FIRST)
        if violations and config.collect is Collect.FIRST:
            _deliver_from_here(plan.subject, violations, config, obj)
            return violations
        if rules:
            violations.extend(_value_violations(obj, plan, rules, config, skip, bindings))
    if violations:
        _deliver_from_here(plan.subject, violations, config, obj)
    return violations


def _not_a_boundary_object(obj: Any, config: Config) -> list[Violation]:
    """``validate`` of something that is no boundary object: SG001, by mode."""
    __tracebackhide__ = True
    rule = REGISTRY["SG001"]
    violations = [Violation.from_finding(Finding(
        f"validate() checks boundary objects (classes made by @boundary_object), got "
        f"{describe(obj)}", "obj", expected="a boundary object",
        actual=type(obj).__name__), code=rule.code, title=rule.title,
        boundary=rule.boundary.value, subject="validate()", bindings={})]
    _deliver_from_here("validate()", violations, config, obj)
    return violations


def _deliver_from_here(subject: str, violations: list[Violation], config: Config,
                       obj: Any) -> None:
    """Deliver; a raised violation leaves with its traceback cut here, so what a reader
    sees ends at the call that validated, not inside specguard."""
    __tracebackhide__ = True
    try:
        deliver(subject, violations, config.mode, obj=obj)
    except ContractViolation as error:
        raise error.with_traceback(None) from None


_NO_SKIP: frozenset[str] = frozenset()
