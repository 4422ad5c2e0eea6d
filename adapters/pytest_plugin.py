"""pytest plugin: turn every specguard check on for a test run, and see what it found.

Installed with specguard (entry point ``pytest11``); it changes nothing unless asked::

    pytest --specguard=strict            # every guard strict, every rule reported (collect=all)
    pytest --specguard=warn --specguard-depth=full

or in the ini file: ``specguard = strict`` and ``specguard_depth = full``. The setting
is applied before any conftest is imported and holds for the session (so guards
decorated at import, in a conftest or while tests are collected, wrap), and is applied
again around each test's setup, call and teardown (a test may still override it with
``specguard.contracts.configure`` or ``specguard.contracts.checking``). A ``@guard``
decorated before pytest could apply it (a module imported by another plugin, say) while
the mode was off stays the plain function: the run warns and names it.

Strict means strict: under ``--specguard=strict`` a test during which a violation was
delivered in warn mode, so only logged (because the code under test switched to
``checking(mode="warn")``), fails, listing those violations. The plugin learns it from
its listener, which every delivery tells its mode, not from the log. A violation that
was raised and caught by the test, as ``pytest.raises`` does, is the test's own
business. Then:

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
_LISTENER = pytest.StashKey[contextlib.ExitStack]()
_PREVIOUS = pytest.StashKey[Any]()
_UNCHECKED = pytest.StashKey[list[str]]()


class _Recorder:
    """The listener of one test: every violation delivered, and, while the test body
    runs, those delivered in warn mode (only logged), which a strict run fails."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.logged: list[Any] = []
        self.in_call = False

    def __call__(self, delivery: Any) -> None:
        self.seen.extend(delivery.violations)
        if self.in_call and delivery.mode.value == "warn":
            self.logged.extend(delivery.violations)


_RECORDER = pytest.StashKey[_Recorder]()


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


def _setting(
    config: pytest.Config, options: Any, option: str, ini: str, allowed: Sequence[str]
) -> str | None:
    value = getattr(options, option, None) or config.getini(ini) or None
    if value is None:
        return None
    value = str(value).strip().lower()
    if value not in allowed:
        raise pytest.UsageError(f"{ini} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _apply_run_settings(config: pytest.Config, options: Any) -> None:
    """Read the run's settings and put them in force for the whole session."""
    settings: dict[str, str] = {}
    mode = _setting(config, options, "specguard", "specguard", _MODES)
    depth = _setting(config, options, "specguard_depth", "specguard_depth", _DEPTHS)
    if mode is not None:
        settings.update(mode=mode, collect="all")
    if depth is not None:
        settings["depth"] = depth
    config.stash[_SETTINGS] = settings
    if settings:
        # A @guard decorated at import decides then whether it wraps at all.
        from specguard import contracts
        from specguard.adapters._guard import UNCHECKED
        config.stash[_UNCHECKED] = sorted(UNCHECKED) if mode not in (None, "off") else []
        config.stash[_PREVIOUS] = contracts.configure(**settings)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Apply the run's settings before the first conftest (and what it imports) loads."""
    _apply_run_settings(early_config, early_config.known_args_namespace)


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker; apply the run's settings if no early hook did; say what
    stays unchecked."""
    config.addinivalue_line("markers", "specguard_off: run this test with specguard checks off")
    if _SETTINGS not in config.stash:  # pytest_load_initial_conftests did not run
        _apply_run_settings(config, config.option)
    unchecked = config.stash.get(_UNCHECKED, [])
    if unchecked:
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"specguard: {len(unchecked)} guarded function(s) were decorated while the mode "
            f"was off, before this run could switch it on, and stay unchecked: "
            f"{', '.join(unchecked[:10])}{' ...' if len(unchecked) > 10 else ''}. Unset "
            "SPECGUARD_MODE=off, or import them after pytest starts."), stacklevel=2)


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
    recorder = _Recorder()
    item.stash[_RECORDER] = recorder
    stack = contextlib.ExitStack()
    stack.enter_context(contracts.listening(recorder))
    item.stash[_LISTENER] = stack
    with _applied(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Run the test body under the run's settings; under strict, fail it for violations
    that were delivered in warn mode (only logged)."""
    recorder = item.stash.get(_RECORDER, None)
    if recorder is not None:
        recorder.in_call = True
    try:
        with _applied(item):
            result = yield
    finally:
        if recorder is not None:
            recorder.in_call = False
    if recorder is not None and recorder.logged and _strict_run(item):
        lines = list(dict.fromkeys(v.format() for v in recorder.logged))
        shown = "\n".join(f"  {line}" for line in lines[:20])
        pytest.fail(f"--specguard=strict: {len(recorder.logged)} violation(s) were only logged "
                    "(the code under test switched specguard to warn mode), and strict fails "
                    f"them:\n{shown}", pytrace=False)
    return result


def _strict_run(item: pytest.Item) -> bool:
    run: dict[str, str] = item.config.stash.get(_SETTINGS, {})
    return run.get("mode") == "strict" and item.get_closest_marker("specguard_off") is None


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
    recorder = item.stash.get(_RECORDER, None)
    seen = recorder.seen if recorder is not None else []
    if report.failed and seen:
        lines = [v.format() for v in seen]
        report.sections.append(("specguard", f"{len(lines)} violation(s) reported:\n"
                                + "\n".join(lines)))
    return report


@pytest.fixture
def specguard_violations(request: pytest.FixtureRequest) -> list[Any]:
    """The ``specguard.contracts.Violation`` records reported during this test, in every mode."""
    recorder = request.node.stash.get(_RECORDER, None)
    seen: list[Any] = recorder.seen if recorder is not None else []
    return seen
