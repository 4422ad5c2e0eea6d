"""The rule registry: every rule declared once, everything else reads it.

``specguard rules``, the docs' rule catalogue, the fuzzer's one-rule mutations and the
benchmark's "all rules" set all iterate :data:`REGISTRY` instead of keeping lists.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specguard.contracts._core._config import Depth
from specguard.contracts._core._violation import Finding

if TYPE_CHECKING:
    from specguard.contracts._core._values import Values

__all__ = ["REGISTRY", "Boundary", "Check", "Rule", "rule", "rules_for", "structural_rule"]

Check = Callable[[Any, "Values"], "Finding | None"]


class Boundary(str, enum.Enum):
    """The hand-overs of one speculative-decoding step (and ``any`` for structure).

    ``across ranks`` is what data-parallel ranks hand each other every step: the metadata
    they must agree on before running the step's collectives together.
    """

    ANY = "any boundary"
    SCHEDULE = "scheduler → runner"
    MODEL_INPUT = "runner → target model"
    VERIFY = "verifier → drafter"
    DRAFT_INPUT = "runner → drafter"
    DRAFT_OUTPUT = "drafter → scheduler"
    RANKS = "across ranks"


@dataclass(frozen=True)
class Rule:
    """A named, documented invariant of one or more boundary objects.

    ``check`` is None for structural rules, which the compiled field specs enforce
    (dtype, rank, shared dimensions); value and cross-field rules carry a function that
    returns a :class:`Finding` on failure and None on success.
    """

    code: str
    title: str
    boundary: Boundary
    depth: Depth
    why: str
    bug: str
    applies_to: tuple[str, ...]
    fields: frozenset[str]
    check: Check | None = None

    def __repr__(self) -> str:
        return f"<rule {self.code} {self.title!r} ({self.boundary.value}, {self.depth.value})>"


REGISTRY: dict[str, Rule] = {}


def _register(new: Rule) -> Rule:
    if new.code in REGISTRY:
        raise ValueError(f"rule code {new.code} is declared twice")
    REGISTRY[new.code] = new
    return new


def structural_rule(
    code: str, title: str, *, why: str, bug: str, boundary: Boundary = Boundary.ANY
) -> Rule:
    """Declare a rule enforced outside the rule loop: by field specs or a constructor."""
    return _register(
        Rule(code, title, boundary, Depth.METADATA, inspect.cleandoc(why), bug, ("*",), frozenset())
    )


def rule(
    code: str,
    title: str,
    *,
    boundary: Boundary,
    applies_to: Iterable[str],
    fields: Iterable[str],
    bug: str,
    depth: Depth = Depth.FULL,
) -> Callable[[Check], Rule]:
    """Register a check function as a rule; its docstring says why the rule exists."""

    def register(check: Check) -> Rule:
        why = inspect.cleandoc(check.__doc__ or "")
        if not why:
            raise ValueError(f"rule {code} needs a docstring saying why it exists")
        subjects, names = tuple(applies_to), frozenset(fields)
        return _register(Rule(code, title, boundary, depth, why, bug, subjects, names, check))

    return register


def rules_for(subject: str) -> tuple[Rule, ...]:
    """The check-carrying rules that apply to a boundary object, in code order."""
    return tuple(
        r
        for code, r in sorted(REGISTRY.items())
        if r.check is not None and (subject in r.applies_to or "*" in r.applies_to)
    )
