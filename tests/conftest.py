"""Shared fixtures: every test starts from the default config and zeroed counters."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from specguard import contracts

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("SPECGUARD_HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    """Deeper runs, off by default: ``--packaging`` installs the wheel in a fresh venv."""
    parser.addoption(
        "--packaging", action="store_true",
        help="also install the built wheel into a fresh virtual environment without torch "
             "and check it there (needs the package index; about a minute)")


@pytest.fixture(autouse=True)
def _default_config():
    """Isolate tests from each other's config changes and counters."""
    previous = contracts.configure(mode="strict", depth="essential", collect="first",
                                   device_values="deferred")
    contracts.STATS.reset()
    yield
    contracts.restore_config(previous)
