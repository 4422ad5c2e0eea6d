"""Counters that engines read for their run summaries; plain ints, no locking."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["STATS", "Stats"]


@dataclass
class Stats:
    """How many objects were validated, how many violations and deferred verdicts."""

    checks: int = 0
    violations: int = 0
    deferred_submitted: int = 0

    def reset(self) -> None:
        """Zero every counter (between runs or tests)."""
        self.checks = self.violations = self.deferred_submitted = 0


STATS = Stats()
