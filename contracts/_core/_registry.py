"""The rule registry: every rule declared once, everything else reads it.

``specguard rules``, the docs' rule catalogue, the fuzzer's one-rule mutations and the
benchmark's "all rules" set all iterate :data:`REGISTRY` instead of keeping lists.

Rules are declared next to their checks, in the contracts and in the layers above them
(the engine adapters declare theirs). So that the catalogue does not depend on what the
process happened to import, the first time it is read as a whole it imports every
module registered under the ``specguard.rules`` entry-point group: the package metadata,
not this module, names them, and the contracts stay unaware of any layer above.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specguard.contracts._core._config import Depth
from specguard.contracts._core._violation import Finding

if TYPE_CHECKING:
    from specguard.contracts._core._values import ValueChecks

__all__ = [
    "REGISTRY",
    "RULE_MODULES_GROUP",
    "Boundary",
    "Check",
    "Registry",
    "Rule",
    "rule",
    "rules_for",
    "structural_rule",
]

Check = Callable[[Any, "ValueChecks"], "Finding | None"]


class Boundary(str, enum.Enum):
    """The hand-overs of one speculative-decoding step (and ``any`` for structure).

    ``across ranks`` is what data-parallel ranks hand each other every step: the metadata
    they must agree on before running the step's collectives together. ``verifier →
    request`` is what each request is finally given at the end of a step.
    """

    ANY = "any boundary"
    SCHEDULE = "scheduler → runner"
    MODEL_INPUT = "runner → target model"
    VERIFY = "verifier → drafter"
    OUTPUT = "verifier → request"
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
    deeper: str = ""
    """What ``full`` depth checks beyond the default for this rule, and its measured cost:
    required for a rule that runs only at ``full``, and for one whose check looks further
    at ``full`` (the catalogue prints it)."""

    def __repr__(self) -> str:
        return f"<rule {self.code} {self.title!r} ({self.boundary.value}, {self.depth.value})>"


#: The entry-point group whose modules declare rules when imported.
RULE_MODULES_GROUP = "specguard.rules"

_DECLARED: dict[str, Rule] = {}


class Registry(Mapping[str, Rule]):
    """The type of :data:`REGISTRY`, the one registry: every declared rule by code,
    complete whatever the process imported before.

    Iterating, counting or looking up an unknown code first imports the modules of the
    ``specguard.rules`` entry-point group, once. Looking up a rule that is already
    declared (what validation does) imports nothing.
    """

    def __init__(self) -> None:
        self._complete = False

    def __getitem__(self, code: str) -> Rule:
        found = _DECLARED.get(code)
        if found is None:
            self._load_rule_modules()
            found = _DECLARED[code]
        return found

    def __iter__(self) -> Iterator[str]:
        self._load_rule_modules()
        return iter(dict(_DECLARED))

    def __len__(self) -> int:
        self._load_rule_modules()
        return len(_DECLARED)

    def __repr__(self) -> str:
        return f"<rule registry: {len(self)} rules>"

    def _load_rule_modules(self) -> None:
        if self._complete:
            return
        self._complete = True  # first: a rule module reading the catalogue must not recurse
        from importlib.metadata import entry_points

        for entry in entry_points(group=RULE_MODULES_GROUP):
            entry.load()


REGISTRY = Registry()


def _register(new: Rule) -> Rule:
    if new.code in _DECLARED:
        raise ValueError(f"rule code {new.code} is declared twice")
    _DECLARED[new.code] = new
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
    depth: Depth = Depth.ESSENTIAL,
    deeper: str = "",
) -> Callable[[Check], Rule]:
    """Register a check function as a rule; its docstring says why the rule exists.

    Every value rule runs at the default depth (``essential``) unless its cost does not fit
    the default's budget (one vectorised pass over what the hand-over carries, no host
    sync): such a rule is declared ``depth=Depth.FULL`` and ``deeper`` says why, with its
    measured cost. A rule whose check reads further at ``full`` (SG110's middle blocks)
    says what in ``deeper`` too.
    """

    def register(check: Check) -> Rule:
        why = inspect.cleandoc(check.__doc__ or "")
        if not why:
            raise ValueError(f"rule {code} needs a docstring saying why it exists")
        if depth is Depth.FULL and not deeper:
            raise ValueError(f"rule {code} runs only at full depth: say why in deeper=, "
                             "with its measured cost")
        subjects, names = tuple(applies_to), frozenset(fields)
        return _register(Rule(code, title, boundary, depth, why, bug, subjects, names, check,
                              inspect.cleandoc(deeper)))

    return register


def rules_for(subject: str) -> tuple[Rule, ...]:
    """The check-carrying rules that apply to a boundary object, in code order."""
    return tuple(
        r
        for code, r in sorted(_DECLARED.items())
        if r.check is not None and (subject in r.applies_to or "*" in r.applies_to)
    )
