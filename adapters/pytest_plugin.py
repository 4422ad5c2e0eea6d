"""pytest plugin: turn every specguard check on for a test run, and see what it found.

Installed with specguard (entry point ``pytest11``); it changes nothing unless asked::

    pytest --specguard=strict            # every guard strict, every rule reported (collect=all)
    pytest --specguard=warn --specguard-depth=full

or in the ini file: ``specguard = strict`` and ``specguard_depth = full``. The setting
holds for the session (so guards decorated while tests are collected wrap) and is
applied again around each test's setup, call and teardown (a test may still override it
with ``specguard.contracts.configure`` or ``specguard.contracts.checking``). Then:

* the ``specguard_violations`` fixture is the list of violations reported during the test,
  in every mode (a warn-mode one is only logged; a strict one may have been caught);
* ``@pytest.mark.specguard_off`` runs a test with the checks off;
* a failing test's report gets a "specguard" section listing what was reported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator, Sequence
from typing import Any

import pytest

__all__ = ["specguard_violations"]

_MODES = ("off", "warn", "strict")
_DEPTHS = ("metadata", "essential", "full")
_SETTINGS = pytest.StashKey[dict[str, str]]()
_SEEN = pytest.StashKey[list[Any]]()
_LISTENER = pytest.StashKey[contextlib.ExitStack]()
_PREVIOUS = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--specguard``, ``--specguard-depth`` and their ini twins."""
    group = parser.getgroup("specguard", "specguard contract checks")
    group.addoption("--specguard", choices=_MODES, default=None, metavar="MODE",
                    help="run every guard in this mode, reporting every rule "
                    "(off, warn, strict; default: the environment's setting)")
    group.addoption("--specguard-depth", choices=_DEPTHS, default=None, metavar="DEPTH",
                    help="check depth for the run (metadata, essential, full)")
    parser.addini("specguard", "specguard mode for the run: off, warn or strict")
    parser.addini("specguard_depth", "specguard depth for the run: metadata, essential or full")


def _setting(config: pytest.Config, option: str, ini: str, allowed: Sequence[str]) -> str | None:
    value = config.getoption(option) or config.getini(ini) or None
    if value is None:
        return None
    value = str(value).strip().lower()
    if value not in allowed:
        raise pytest.UsageError(f"{ini} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and read the run's settings."""
    config.addinivalue_line("markers", "specguard_off: run this test with specguard checks off")
    settings: dict[str, str] = {}
    mode = _setting(config, "specguard", "specguard", _MODES)
    depth = _setting(config, "specguard_depth", "specguard_depth", _DEPTHS)
    if mode is not None:
        settings.update(mode=mode, collect="all")
    if depth is not None:
        settings["depth"] = depth
    config.stash[_SETTINGS] = settings
    if settings:
        # Also for the whole session: a @guard decorated at import (during collection)
        # decides then whether it wraps at all.
        from specguard import contracts
        config.stash[_PREVIOUS] = contracts.configure(**settings)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Put back the settings the session started with."""
    previous = config.stash.get(_PREVIOUS, None)
    if previous is not None:
        from specguard import contracts
        contracts.restore_config(previous)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say in the header when the run's checks are set."""
    settings: dict[str, str] = config.stash.get(_SETTINGS, {})
    if not settings:
        return None
    return "specguard: " + ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))


@contextlib.contextmanager
def _applied(item: pytest.Item) -> Iterator[None]:
    run: dict[str, str] = item.config.stash.get(_SETTINGS, {})
    settings = dict(run)
    if item.get_closest_marker("specguard_off") is not None:
        settings["mode"] = "off"
    if not settings:
        yield
        return
    from specguard import contracts
    previous = contracts.configure(**settings)
    try:
        yield
    finally:
        contracts.restore_config(previous)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Start recording violations, then set up the test under the run's settings."""
    from specguard import contracts
    seen: list[Any] = []
    item.stash[_SEEN] = seen
    stack = contextlib.ExitStack()
    stack.enter_context(contracts.listening(seen.extend))
    item.stash[_LISTENER] = stack
    with _applied(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Run the test body under the run's settings."""
    with _applied(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """Tear down under the run's settings, then stop recording."""
    try:
        with _applied(item):
            return (yield)
    finally:
        stack = item.stash.get(_LISTENER, None)
        if stack is not None:
            stack.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the violations reported so far to a failing test's report."""
    report = yield
    seen = item.stash.get(_SEEN, [])
    if report.failed and seen:
        lines = [v.format() for v in seen]
        report.sections.append(("specguard", f"{len(lines)} violation(s) reported:\n"
                                + "\n".join(lines)))
    return report


@pytest.fixture
def specguard_violations(request: pytest.FixtureRequest) -> list[Any]:
    """The ``specguard.contracts.Violation`` records reported during this test, in every mode."""
    seen: list[Any] = request.node.stash.get(_SEEN, [])
    return seen
