"""Modes and depths: read once from the environment, changed from code or for a block.

``SPECGUARD_MODE``      off | warn | strict       (default strict)
``SPECGUARD_DEPTH``     metadata | essential | full  (default essential)
``SPECGUARD_COLLECT``   first | all               (default first)
``SPECGUARD_DEVICE_VALUES`` deferred | assert | sync  (default deferred)

Invalid values raise :class:`ConfigError` at import, listing the allowed values, so a
typo in a deployment never silently turns the checks off.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from specguard.contracts._core._arrays import short_repr
from specguard.contracts._core._errors import ConfigError

__all__ = [
    "Collect",
    "Config",
    "Depth",
    "DeviceValues",
    "Mode",
    "checking",
    "configure",
    "current",
    "parse_setting",
]


class Mode(str, enum.Enum):
    """What happens on a violation: nothing is checked, it is logged, or it is raised."""

    OFF = "off"
    WARN = "warn"
    STRICT = "strict"


class Depth(str, enum.Enum):
    """How deep a check looks, each depth including the one before.

    ``metadata`` reads types, dtypes, shapes and scalars only; ``essential`` (the
    default) adds every value rule whose cost fits the default's budget: one vectorised
    pass over what the hand-over carries (fused into one pass per object where a
    clearance exists), a deferred verdict with no sync on device tensors. ``full`` adds
    what does not fit that budget, each rule saying what and at what measured cost
    (``Rule.deeper``, printed by the rule catalogue).
    """

    METADATA = "metadata"
    ESSENTIAL = "essential"
    FULL = "full"


class Collect(str, enum.Enum):
    """Stop at the first violation of an object, or gather all of them into one report."""

    FIRST = "first"
    ALL = "all"


class DeviceValues(str, enum.Enum):
    """How value checks treat tensors that live on an accelerator.

    ``deferred`` computes the verdict on the device and reads it at the next sync point;
    ``assert`` uses ``torch._assert_async`` (a failure kills the CUDA context);
    ``sync`` reads the verdict at once, paying a host sync.
    """

    DEFERRED = "deferred"
    ASSERT = "assert"
    SYNC = "sync"


@dataclass(frozen=True)
class Config:
    """The settings every check reads; immutable, replaced as a whole."""

    mode: Mode = Mode.STRICT
    depth: Depth = Depth.ESSENTIAL
    collect: Collect = Collect.FIRST
    device_values: DeviceValues = DeviceValues.DEFERRED


_ENV_FIELDS: Mapping[str, tuple[str, type[enum.Enum]]] = {
    "SPECGUARD_MODE": ("mode", Mode),
    "SPECGUARD_DEPTH": ("depth", Depth),
    "SPECGUARD_COLLECT": ("collect", Collect),
    "SPECGUARD_DEVICE_VALUES": ("device_values", DeviceValues),
}


E = TypeVar("E", bound=enum.Enum)


def parse_setting(enum_type: type[E], value: object, source: str) -> E:
    """``value`` as a member of ``enum_type`` (any case, spaces trimmed); ConfigError if not."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type(value)  # the common spelling: one dictionary lookup
        except ValueError:
            pass
        try:
            return enum_type(value.strip().lower())
        except ValueError:
            pass
    allowed = ", ".join(repr(m.value) for m in enum_type)
    raise ConfigError(f"{source} must be one of {allowed}; got {short_repr(value)}")


def from_environ(environ: Mapping[str, str]) -> Config:
    """Build a config from ``SPECGUARD_*`` variables, validating each one."""
    values: dict[str, enum.Enum] = {}
    for variable, (name, enum_type) in _ENV_FIELDS.items():
        raw = environ.get(variable)
        if raw is not None and raw.strip():
            values[name] = parse_setting(enum_type, raw, variable)
    return replace(Config(), **values)  # type: ignore[arg-type]


@dataclass(eq=False)
class _Block:
    """One ``checking`` block: its config, the block it was opened in, whether it is open.

    The context variable holds the innermost block; a closed block is skipped. Closing
    is a flag on the block itself, so it takes effect in every context that holds the
    block, including the one it was opened in when it is left from another (a generator
    resumed by another asyncio task), where a context variable cannot be reset.
    """

    config: Config
    outer: _Block | None
    open: bool = True


_global: Config = from_environ(os.environ)
_override: contextvars.ContextVar[_Block | None] = contextvars.ContextVar(
    "specguard_config", default=None
)


def current() -> Config:
    """The config in force here: the innermost open ``checking`` block's, else the global one."""
    block = _override.get()
    while block is not None:
        if block.open:
            return block.config
        block = block.outer
    return _global


def _updated(base: Config, changes: Mapping[str, object]) -> Config:
    fields = {name: enum_type for name, enum_type in _ENV_FIELDS.values()}
    parsed: dict[str, enum.Enum] = {}
    for name, value in changes.items():
        if value is None:
            continue
        if name not in fields:
            raise ConfigError(f"unknown setting {name!r}; known: {', '.join(fields)}")
        parsed[name] = parse_setting(fields[name], value, name)
    return replace(base, **parsed)  # type: ignore[arg-type]


def configure(
    *,
    mode: Mode | str | None = None,
    depth: Depth | str | None = None,
    collect: Collect | str | None = None,
    device_values: DeviceValues | str | None = None,
) -> Config:
    """Change the global settings; returns the previous config so it can be restored."""
    global _global
    previous = _global
    _global = _updated(
        _global,
        {"mode": mode, "depth": depth, "collect": collect, "device_values": device_values},
    )
    return previous


def restore(config: Config) -> None:
    """Put back a config returned by :func:`configure`."""
    global _global
    _global = config


@contextlib.contextmanager
def checking(
    *,
    mode: Mode | str | None = None,
    depth: Depth | str | None = None,
    collect: Collect | str | None = None,
    device_values: DeviceValues | str | None = None,
) -> Iterator[Config]:
    """Override settings for a block, in this thread or asyncio task only.

    Leaving the block is safe from any context: a generator that opened it and is
    resumed by another asyncio task closes it there, and the first task does not stay
    in the overridden mode."""
    changes = {"mode": mode, "depth": depth, "collect": collect, "device_values": device_values}
    block = _Block(_updated(current(), changes), _override.get())
    token = _override.set(block)
    try:
        yield block.config
    finally:
        block.open = False  # in every context that holds it, whichever leaves the block
        # Left from another context, the token cannot be reset: the closed block is
        # skipped there instead.
        with contextlib.suppress(ValueError):
            _override.reset(token)
