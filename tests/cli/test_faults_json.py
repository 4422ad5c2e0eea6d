"""``specguard faults --json``: the catalogue with every field, as rules, check and bench have."""

from __future__ import annotations

import dataclasses
import json

from specguard.cli import main
from specguard.runner.faults import FAULTS


def test_faults_json_is_the_whole_catalogue(capsys):
    assert main(["faults", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [entry["name"] for entry in listed] == list(FAULTS)
    for entry, fault in zip(listed, FAULTS.values(), strict=True):
        assert entry["rules"] == list(fault.rules)
        assert {k: v for k, v in entry.items() if k != "rules"} == json.loads(
            json.dumps(dataclasses.asdict(fault)))
