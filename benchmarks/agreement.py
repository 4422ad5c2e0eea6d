"""Fairness check: the floor, the naive baseline and specguard reach the same verdicts.

A comparison of costs means something only if the three check the same rules. Before
timing, each must accept the clean batch and reject every one-rule mutation of it;
specguard and the floor must also name the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from specguard import contracts
from specguard.benchmarks import floor
from specguard.benchmarks.violations import MUTATIONS, VARIANTS, broken, unbroken_rules
from specguard.benchmarks.workload import Fields, build

__all__ = ["Verdict", "disagreements", "floor_verdict", "naive_verdict", "specguard_verdict"]

#: A rule code, "rejected" (refused without naming a rule) or None (accepted).
Verdict = str | None

_CODE = re.compile(r"\bSG\d{3}\b")


def specguard_verdict(fields: Fields) -> Verdict:
    """The first rule specguard reports for a batch of ``fields`` (full depth), or None."""
    with contracts.checking(mode="strict", depth="full", collect="first"):
        try:
            contracts.ScheduledBatch(**fields)
        except contracts.ContractViolation as error:
            return error.codes[0]
    return None


def floor_verdict(fields: Fields) -> Verdict:
    """The rule the floor reports for ``fields``, or None."""
    batch = build(fields)
    on_numpy = isinstance(fields["seq_ids"], np.ndarray)
    return floor.check(batch) if on_numpy else floor.check_torch(batch)


def naive_verdict(fields: Fields) -> Verdict:
    """The naive baseline's verdict: the rule its message names, "rejected", or None."""
    from specguard.benchmarks.naive import naive_batch

    try:
        naive_batch(**fields)
    except Exception as error:  # jaxtyping, beartype and pydantic each raise their own
        found = _CODE.search(str(error))
        return found.group(0) if found else "rejected"
    return None


def _agrees(expected: Verdict, got: Verdict, *, exact: bool) -> bool:
    if exact or expected is None or got is None:
        return got == expected
    return got in (expected, "rejected")


def disagreements(
    fields: Fields, checkers: dict[str, Callable[[Fields], Verdict]] | None = None
) -> list[str]:
    """Every case where a checker disagrees with the expected verdict (empty: fair).

    Every value rule of the batch must have a mutation; the clean batch must pass
    everywhere; each mutation must be reported by specguard and the floor as its rule,
    and rejected by the naive baseline (which names the rule whenever its own validator,
    rather than jaxtyping or beartype, caught it).
    """
    checkers = checkers or {
        "specguard": specguard_verdict, "floor": floor_verdict, "naive": naive_verdict,
    }
    found = [f"no mutation breaks rule {code}" for code in unbroken_rules()]
    cases: list[tuple[str, Verdict, Any]] = [("clean", None, fields)]
    cases += [(code, code, broken(fields, code)) for code in MUTATIONS]
    cases += [(label, code, mutate(fields)) for label, (code, mutate) in VARIANTS.items()]
    for label, expected, case in cases:
        for name, checker in checkers.items():
            got = checker(case)
            if not _agrees(expected, got, exact=name != "naive"):
                found.append(f"{name} on {label}: expected {expected}, got {got}")
    return found
