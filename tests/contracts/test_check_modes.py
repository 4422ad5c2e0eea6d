"""Modes (off, warn, strict) and how settings are changed, scoped and restored."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import numpy as np
import pytest
from contract_builders import build

from specguard import contracts
from specguard.adapters import guard

_SHORT_DRAFTS: dict[str, Any] = {"draft_token_ids": np.zeros((2, 2), dtype=np.int64)}


def test_strict_is_the_default_and_raises():
    """Out of the box a broken object raises at construction."""
    assert contracts.current_config() == contracts.Config()
    assert contracts.current_config().mode is contracts.Mode.STRICT
    with pytest.raises(contracts.ContractViolation, match="SG101"):
        build(contracts.ScheduledBatch, **_SHORT_DRAFTS)


def test_off_never_raises_on_construction():
    """With mode off even wrong types and wrong shapes build, and nothing is counted."""
    with contracts.checking(mode="off", depth="full"):
        batch = build(contracts.ScheduledBatch, seq_ids=[1, 2], **_SHORT_DRAFTS)
        drafts = contracts.DraftTokens.from_mapping(
            [1], {1: [1, 2, 3], 9: [1]}, mtp_k=2, vocab_size=4, placeholder=[1, 2])
        assert contracts.validate(batch) == []
    assert batch.seq_ids == [1, 2]
    assert drafts.draft_token_ids.shape == (1, 2)
    assert contracts.STATS.checks == 0


def test_off_guard_returns_the_original_function():
    """A guard applied while the mode is off is the identity: no wrapper at all."""

    def step(batch):
        return batch

    with contracts.checking(mode="off"):
        decorated = guard(batch=contracts.ScheduledBatch)(step)
    assert decorated is step


def test_warn_logs_and_goes_on(caplog):
    """Warn mode logs each violation on the "specguard" logger and returns the object."""
    with caplog.at_level(logging.WARNING, logger="specguard"), contracts.checking(mode="warn"):
        batch = build(contracts.ScheduledBatch, **_SHORT_DRAFTS)
    assert batch.draft_token_ids.shape == (2, 2)
    assert [r.name for r in caplog.records] == ["specguard"]
    assert re.match(re.escape(
        "specguard: SG101 one draft row per decode seq, in batch order "
        "[ScheduledBatch.draft_token_ids, scheduler → runner]: seq 44 at batch position 4: "
        "decode seq has no drafts and no draft row"), caplog.records[0].getMessage())
    assert contracts.STATS.violations == 1


def test_checking_restores_the_previous_settings():
    """A checking block overrides settings and puts them back, also after an exception."""
    before = contracts.current_config()
    with pytest.raises(RuntimeError), contracts.checking(mode="warn", depth="full") as inside:
        assert inside == contracts.current_config()
        assert (inside.mode, inside.depth) == (contracts.Mode.WARN, contracts.Depth.FULL)
        raise RuntimeError("leave the block")
    assert contracts.current_config() == before


def test_checking_blocks_nest():
    """An inner block changes only what it names and restores the outer block's settings."""
    with contracts.checking(mode="warn"):
        with contracts.checking(collect="all") as inner:
            assert (inner.mode, inner.collect) == (contracts.Mode.WARN, contracts.Collect.ALL)
        assert contracts.current_config().collect is contracts.Collect.FIRST
        assert contracts.current_config().mode is contracts.Mode.WARN


def test_checking_is_local_to_its_thread():
    """Another thread still sees the global settings while a block is open here."""
    seen = []
    with contracts.checking(mode="off"):
        thread = threading.Thread(target=lambda: seen.append(contracts.current_config().mode))
        thread.start()
        thread.join()
    assert seen == [contracts.Mode.STRICT]


def test_configure_returns_the_previous_config():
    """configure changes the global settings and returns what to restore."""
    previous = contracts.configure(mode="warn", device_values="sync")
    try:
        assert previous == contracts.Config()
        now = contracts.current_config()
        assert (now.mode, now.device_values) == (contracts.Mode.WARN, contracts.DeviceValues.SYNC)
        assert now.depth is previous.depth
    finally:
        contracts.restore_config(previous)
    assert contracts.current_config() == previous


def test_settings_accept_enums_and_any_case():
    """Enum members and case-insensitive strings are both accepted."""
    with contracts.checking(mode=contracts.Mode.WARN, depth=" FULL ") as config:
        assert (config.mode, config.depth) == (contracts.Mode.WARN, contracts.Depth.FULL)


@pytest.mark.parametrize(("setting", "allowed"), [
    ("mode", "'off', 'warn', 'strict'"),
    ("depth", "'metadata', 'essential', 'full'"),
    ("collect", "'first', 'all'"),
    ("device_values", "'deferred', 'assert', 'sync'"),
])
def test_bad_setting_is_a_config_error_listing_allowed_values(setting, allowed):
    """A typo is a ConfigError naming the allowed values, and nothing changes."""
    before = contracts.current_config()
    with pytest.raises(contracts.ConfigError, match=re.escape(
        f"{setting} must be one of {allowed}; got 'bogus'"
    )):
        contracts.configure(**{setting: "bogus"})
    assert contracts.current_config() == before


def test_config_error_is_a_sibling_of_contract_violation():
    """One root catches everything; catching a violation never swallows a settings typo."""
    from specguard.adapters import SnapshotError

    for error in (contracts.ContractViolation, contracts.ConfigError, SnapshotError):
        assert issubclass(error, contracts.SpecguardError)
        assert issubclass(error, ValueError)
    assert not issubclass(contracts.ConfigError, contracts.ContractViolation)
    assert not issubclass(SnapshotError, contracts.ContractViolation)
    assert issubclass(contracts.DeferredViolation, contracts.ContractViolation)
    with pytest.raises(contracts.ConfigError):
        try:
            contracts.configure(mode="stirct")
        except contracts.ContractViolation:  # an engine's handler for broken batches
            pytest.fail("a ConfigError was caught as a ContractViolation")


def test_depth_argument_overrides_for_one_validation():
    """validate(obj, depth="full") looks at values even when the depth in force is metadata."""
    batch = build(contracts.ScheduledBatch)
    batch.token_ids[0] = -1
    with contracts.checking(depth="metadata"):
        assert contracts.validate(batch) == []
        with pytest.raises(contracts.ContractViolation, match="SG112"):
            contracts.validate(batch, depth="full")
