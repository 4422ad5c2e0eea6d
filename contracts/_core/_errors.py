"""The exceptions specguard raises.

One root, so that a caller can catch everything specguard says with one clause, and
siblings under it, so that catching a broken contract never swallows a typo in the
settings or an unreadable file::

    SpecguardError                        anything specguard raises on purpose
    ├── ContractViolation (ValueError)    a boundary object broke one or more rules
    │   └── DeferredViolation             a device-side verdict read one step late
    ├── ConfigError (ValueError)          a bad mode, depth or environment value
    └── SnapshotError (ValueError)        a violation snapshot that cannot be read
                                          (specguard.adapters: snapshots live there)

A :class:`ContractViolation` carries ``violations``: the structured records behind its
message.
"""

from __future__ import annotations

from collections.abc import Sequence

from specguard.contracts._core._violation import Violation

__all__ = ["ConfigError", "ContractViolation", "DeferredViolation", "SpecguardError",
           "format_report", "next_steps"]


class SpecguardError(Exception):
    """The root of every exception specguard raises on purpose."""


class ContractViolation(SpecguardError, ValueError):
    """A boundary object broke one or more rules; ``violations`` lists each one."""

    violations: tuple[Violation, ...]

    def __init__(self, message: str, violations: Sequence[Violation] = ()) -> None:
        super().__init__(message)
        self.violations = tuple(violations)

    @classmethod
    def from_violations(cls, subject: str, violations: Sequence[Violation]) -> ContractViolation:
        """Build the exception whose message lists every violation of one object."""
        return cls(format_report(subject, violations), violations)

    @property
    def codes(self) -> tuple[str, ...]:
        """The rule codes of the violations, in the order they were found."""
        return tuple(v.code for v in self.violations)


class DeferredViolation(ContractViolation):
    """A value check computed on the device failed; raised at the next sync point."""


class ConfigError(SpecguardError, ValueError):
    """A mode, depth or environment variable has a value outside its allowed set."""


def format_report(subject: str, violations: Sequence[Violation]) -> str:
    """One header line naming the object, one line per violation, then where to look next."""
    count = len(violations)
    noun = "rule" if count == 1 else "rules"
    lines = [f"{subject} broke {count} {noun}:"]
    lines.extend(f"  {v.format()}" for v in violations)
    if violations:
        lines.append(next_steps(violations))
    return "\n".join(lines)


def next_steps(violations: Sequence[Violation]) -> str:
    """The last line of a report: how to read up on the rules, how to keep the object."""
    codes = list(dict.fromkeys(v.code for v in violations))
    return (f"  next: specguard rules {' '.join(codes)} (docs: rules.md#{codes[0].lower()}); "
            "set SPECGUARD_SNAPSHOT_DIR to keep the object for specguard check")


for _cls in (SpecguardError, ContractViolation, DeferredViolation, ConfigError):
    _cls.__module__ = "specguard.contracts"
