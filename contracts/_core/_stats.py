"""Counters that engines read for their run summaries; plain ints, no locking."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["STATS", "Stats"]


@dataclass
class Stats:
    """How many objects were validated, how many violations and deferred verdicts."""

    checks: int = 0
    violations: int = 0
    deferred_submitted: int = 0
    repeats_not_logged: int = 0
    """Warn-mode violations counted but not logged: repeats of one already logged."""
    warned: dict[tuple[str, str, str | None, int | None], int] = field(default_factory=dict)
    """Warn-mode violations by (rule, object, field, batch position): times each was seen."""

    def reset(self) -> None:
        """Zero every counter (between runs or tests)."""
        self.checks = self.violations = self.deferred_submitted = 0
        self.repeats_not_logged = 0
        self.warned.clear()


STATS = Stats()
