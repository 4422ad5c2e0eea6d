"""Turn an annotated class into a validated boundary object.

``@boundary_object(Boundary.SCHEDULE)`` makes the class a frozen, slotted, keyword-only
dataclass, compiles its jaxtyping annotations into field specs and a fast metadata
check (once, here), validates every instance when it is built, and registers the class
by name (:func:`boundary_classes`), the way ``@rule`` registers a rule: what lists
boundary classes (the snapshots' readable types, ``BOUNDARY_OBJECTS``) reads the
registry instead of keeping a list of its own.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TypeVar

from specguard.contracts._core._arrays import host_value
from specguard.contracts._core._errors import ContractViolation
from specguard.contracts._core._fields import compile_fields
from specguard.contracts._core._init import install_slot_init
from specguard.contracts._core._registry import Boundary
from specguard.contracts._core._validate import Plan, validate

if sys.version_info >= (3, 11):  # typing has it: one import less at start-up
    from typing import dataclass_transform
else:  # pragma: no cover - Python 3.10
    from typing_extensions import dataclass_transform

__all__ = ["BoundaryObject", "boundary_classes", "boundary_object", "compile_checks"]

T = TypeVar("T")

# Every boundary class defined so far, by name, in the order they were defined (a class
# defined again under the same name, as in a notebook, replaces the first).
_CLASSES: dict[str, type[BoundaryObject]] = {}


class BoundaryObject:
    """Base of every boundary object: validation on construction, seq lookups for messages."""

    __slots__ = ()
    __sg_plan__: Plan
    __sg_boundary__: str

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        inherited: Plan | None = getattr(cls, "__sg_plan__", None)
        if inherited is not None:
            # A subclass is checked by its parent's fields and rules, but learns its own
            # field names: a plan shared with the parent would copy the subclass's extra
            # fields into the parent's objects.
            cls.__sg_plan__ = inherited.for_subclass()

    def __post_init__(self) -> None:
        __tracebackhide__ = True  # pytest shows the constructor's caller, not specguard
        try:
            validate(self)
        except ContractViolation as error:  # cut below here: the rest is specguard's
            raise error.with_traceback(None) from None

    def _sg_owner(self, position: int | None, token: int | None) -> tuple[int | None, int | None]:
        """(batch position, seq id) of a flagged position or token, read from host ids."""
        if position is None and token is not None:
            position = self._sg_token_position(token)
        if position is None:
            return None, None
        return position, host_value(getattr(self, "seq_ids", None), position)

    def _sg_token_position(self, token: int) -> int | None:
        """The batch position owning a flat token index; objects with token streams override."""
        return None


@dataclass_transform(kw_only_default=True, frozen_default=True)
def boundary_object(
    boundary: Boundary, *, minimums: dict[str, int] | None = None
) -> Callable[[type[T]], type[T]]:
    """Class decorator: dataclass + compiled specs + validation on construction."""

    def build(cls: type[T]) -> type[T]:
        made = dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False)(cls)
        install_slot_init(made)  # each field set through its slot: built once a hand-over
        fields = compile_fields(made, minimums)
        plan = Plan(made.__name__, fields)  # its metadata predicate is compiled at first use
        made.__sg_plan__ = plan  # type: ignore[attr-defined]
        made.__sg_boundary__ = boundary.value  # type: ignore[attr-defined]
        known = _CLASSES.get(made.__name__)
        if known is not None and known.__module__ != made.__module__:
            # Rules apply to a class by its name: two classes of one name would share
            # (and silently run) each other's rules.
            raise ValueError(f"boundary object {made.__name__} of {made.__module__} has the "
                             f"name of {known.__module__}'s; rules apply by name")
        _CLASSES.pop(made.__name__, None)  # a redefinition moves to the end
        _CLASSES[made.__name__] = made  # type: ignore[assignment]
        return made

    return build


def compile_checks() -> int:
    """Compile the metadata check of every boundary class defined so far, now; return
    how many were compiled.

    A class's check is otherwise generated at its first validation: a few milliseconds
    each, which an engine would pay inside its first steps. Call this at start-up to pay
    it there instead.
    """
    compiled = 0
    for cls in list(_CLASSES.values()):
        plan = cls.__sg_plan__
        if getattr(plan.fast_check, "__sg_stand_in__", False):
            plan.compiled_fast_check()
            compiled += 1
    return compiled


def boundary_classes() -> dict[str, type[BoundaryObject]]:
    """Every class made by :func:`boundary_object` in this process, by name, in the
    order they were defined (a copy)."""
    return dict(_CLASSES)
