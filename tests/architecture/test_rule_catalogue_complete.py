"""The rule catalogue is complete whatever a process imported first."""

from __future__ import annotations

import json
import subprocess
import sys

from specguard import adapters, contracts  # noqa: F401  (every rule module imported here)


def _in_fresh_process(code: str) -> dict:
    """Run ``code`` in a new interpreter (nothing imported yet); return its JSON output."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    return json.loads(done.stdout)


def test_contracts_alone_sees_every_rule():
    """Importing only specguard.contracts, the catalogue lists the adapters' rules too."""
    seen = _in_fresh_process(
        "import json; from specguard.contracts import REGISTRY\n"
        "print(json.dumps(sorted(REGISTRY)))")
    assert seen == sorted(contracts.REGISTRY)
    assert {"SG601", "SG611", "SG621"} <= set(seen)


def test_validation_lookups_load_no_rule_modules():
    """Looking up a rule that is declared imports nothing: validating stays adapter-free."""
    seen = _in_fresh_process(
        "import json, sys; from specguard.contracts import REGISTRY\n"
        "title = REGISTRY['SG101'].title\n"
        "print(json.dumps([title, 'specguard.adapters' in sys.modules]))")
    assert seen == [contracts.REGISTRY["SG101"].title, False]


def test_an_unknown_code_is_a_key_error_after_loading():
    """A code no module declares is missing from the complete catalogue, not half-looked-up."""
    assert "SG999" not in contracts.REGISTRY
    assert contracts.REGISTRY.get("SG999") is None
