"""The exceptions specguard raises.

One root, so that a caller can catch everything specguard says with one clause, and
siblings under it, so that catching a broken contract never swallows a typo in the
settings or an unreadable file::

    SpecguardError                        anything specguard raises on purpose
    ├── ContractViolation (ValueError)    a boundary object broke one or more rules
    │   └── DeferredViolation             a device-side verdict read one step late
    ├── ConfigError (ValueError)          a bad mode, depth or environment value
    ├── SnapshotError (ValueError)        a violation snapshot that cannot be read
    │                                     (specguard.adapters: snapshots live there)
    ├── CorpusError (ValueError)          a recorded-traffic corpus file that cannot
    │                                     be read (specguard.adapters, like snapshots)
    └── UnsupportedEngine                 an engine runner an installer cannot read
                                          (specguard.adapters: every engine's installer)

A :class:`ContractViolation` carries ``violations``: the structured records behind its
message. The two violation exceptions are raised in one place, the delivery of
:mod:`._delivery` in strict mode, after every listener has been told; their message is
:func:`specguard.contracts.format_report`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from specguard.contracts._core._format import format_report
from specguard.contracts._core._violation import Violation

__all__ = ["ConfigError", "ContractViolation", "DeferredViolation", "SpecguardError"]


class SpecguardError(Exception):
    """The root of every exception specguard raises on purpose."""


class ContractViolation(SpecguardError, ValueError):
    """A boundary object broke one or more rules; ``violations`` lists each one."""

    violations: tuple[Violation, ...]

    def __init__(self, message: str, violations: Sequence[Violation] = ()) -> None:
        super().__init__(message)
        self.violations = tuple(violations)

    @classmethod
    def from_violations(cls, subject: str, violations: Sequence[Violation], *,
                        kept_at: str | None = None) -> ContractViolation:
        """Build the exception whose message lists every violation of one object;
        ``kept_at`` is where the object was kept (a snapshot), for the ``next:`` line."""
        return cls(format_report(subject, violations, kept_at=kept_at), violations)

    @property
    def codes(self) -> tuple[str, ...]:
        """The rule codes of the violations, in the order they were found."""
        return tuple(v.code for v in self.violations)


class DeferredViolation(ContractViolation):
    """A value check computed on the device failed; raised at the next sync point."""


class ConfigError(SpecguardError, ValueError):
    """A mode, depth or environment variable has a value outside its allowed set."""


for _cls in (SpecguardError, ContractViolation, DeferredViolation, ConfigError):
    _cls.__module__ = "specguard.contracts"
