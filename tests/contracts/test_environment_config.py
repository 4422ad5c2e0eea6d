"""Settings read once from SPECGUARD_* at import, and what importing contracts costs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPECGUARD_")}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_bogus_mode_fails_at_import_listing_allowed_values():
    """SPECGUARD_MODE=bogus stops the import with a ConfigError naming the allowed values."""
    done = _run("from specguard import contracts", SPECGUARD_MODE="bogus")
    assert done.returncode != 0
    assert ("specguard.contracts.ConfigError: SPECGUARD_MODE must be one of "
            "'off', 'warn', 'strict'; got 'bogus'") in done.stderr


@pytest.mark.parametrize(("variable", "value", "attribute"), [
    ("SPECGUARD_MODE", "warn", "mode"),
    ("SPECGUARD_DEPTH", "full", "depth"),
    ("SPECGUARD_COLLECT", "all", "collect"),
    ("SPECGUARD_DEVICE_VALUES", "sync", "device_values"),
])
def test_environment_variable_is_honored(variable, value, attribute):
    """Each variable sets its setting for the whole process."""
    done = _run("from specguard import contracts; "
                f"print(contracts.current_config().{attribute}.value)",
                **{variable: value})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == value


def test_warn_from_environment_logs_instead_of_raising():
    """Under SPECGUARD_MODE=warn a broken object is built and the violation is logged."""
    code = (
        "import numpy as np, contracts\n"
        "out = contracts.DrafterOutput(mtp_k=2, vocab_size=8, seq_ids=np.arange(3),\n"
        "    draft_token_ids=np.zeros((2, 2), dtype=np.int64))\n"
        "print(out.draft_token_ids.shape)\n"
    )
    done = _run(code, SPECGUARD_MODE="warn")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(2, 2)"
    assert "specguard: SG105 one entry per seq in every per-seq array" in done.stderr


def test_import_contracts_does_not_import_torch():
    """numpy-only engines never pay for torch: importing contracts leaves it unloaded."""
    done = _run("import sys, contracts; print('torch' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
