"""How violations read: compact shapes, dimension bindings, never whole arrays."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from contract_builders import build

from specguard import contracts

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(("value", "text"), [
    (np.zeros((127, 3), dtype=np.int32), "i32[127,3]"),
    (np.zeros(8, dtype=np.int64), "i64[8]"),
    (np.zeros(4, dtype=bool), "bool[4]"),
    (np.zeros((), dtype=np.float32), "f32[]"),
    (torch.zeros(2, 5, dtype=torch.int32), "i32[2,5]"),
    (torch.zeros(3, device="meta"), "f32[3]@meta"),
    ([1, 2, 3], "list"),
    (None, "None"),
    (7, "7"),
])
def test_describe_is_compact(value, text):
    """Arrays read as dtype[shape] (device when not CPU); other values by type or repr."""
    assert contracts.describe(value) == text


def test_message_format_is_code_title_target_where_reason_detail_bindings():
    """One line per violation: CODE title [Subject.field, boundary]: where: reason (...) {...}."""
    with pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, num_drafts=np.array([2, 2]))
    line = caught.value.violations[0].format()
    assert re.fullmatch(
        r"SG\d{3} [^\[]+ \[ScheduledBatch\.num_drafts, scheduler → runner\]: "
        r"seq 44 at batch position 4: .+ \(expected .+; actual 2\) \{.+\}", line)
    assert line.endswith("{mtp_k=2, num_decode=3, num_tokens=15, num_seqs=5, max_blocks=5}")


def test_bindings_list_the_dimensions_in_binding_order():
    """Scalars bind first, then array axes, in field order."""
    with pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, token_ids=np.arange(3))
    assert dict(caught.value.violations[0].bindings) == {
        "mtp_k": 2, "num_decode": 3, "num_tokens": 15, "num_seqs": 5, "max_blocks": 5}


def test_large_arrays_never_appear_in_messages():
    """A 10k-token stream with one bad id is described, never printed."""
    n = 10_000
    tokens = np.full(n, 777, dtype=np.int64)
    tokens[9_000] = -1
    fields = {
        "vocab_size": 1000, "num_tokens": n, "seq_ids": np.array([5, 6]),
        "input_ids": tokens, "positions": np.arange(n), "query_start_loc": np.array([0, 4000, n]),
        "sample_indices": np.array([3999, n - 1]),
    }
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        contracts.DrafterInput(**fields)
    message = str(caught.value)
    assert "777" not in message
    assert len(message) < 400
    assert "seq 6 at batch position 1, token 9000: input id is -1" in message

    with pytest.raises(contracts.ContractViolation) as caught:
        contracts.DrafterInput(**{**fields, "positions": np.arange(n + 1)})
    assert "777" not in str(caught.value)
    assert "positions is i64[10001] but num_tokens=10000" in str(caught.value)


def test_violation_records_are_structured():
    """Each violation carries its parts as fields and round-trips through to_dict."""
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.DrafterInput, input_ids=np.array([1, 2, 3, -1, 5, 6]))
    violation = caught.value.violations[0]
    assert violation.to_dict() == {
        "code": "SG301", "title": "no sentinel reaches an embedding",
        "boundary": "runner → drafter", "subject": "DrafterInput", "reason": "input id is -1",
        "field": "input_ids", "position": 1, "seq_id": 8,
        "expected": "0 <= id < vocab_size=32", "actual": None, "token": 3,
        "bindings": {"num_tokens": 6, "num_seqs": 3},
    }
    fields: dict[str, Any] = violation.to_dict()
    assert contracts.Violation(**fields) == violation


def test_where_reads_naturally_with_partial_locations():
    """Missing parts of the location are left out rather than printed as None."""
    base = contracts.Violation(code="SG000", title="t", boundary="b", subject="S", reason="r")
    assert base.format() == "SG000 t [S, b]: r"
    assert contracts.Violation(**{**base.to_dict(), "token": 4}).where == "token 4"
    assert contracts.Violation(**{**base.to_dict(), "seq_id": 9}).where == "seq 9"
    assert contracts.Violation(**{**base.to_dict(), "position": 2}).where == "at batch position 2"


def test_report_ends_with_a_pointer_to_what_to_do_next():
    """The last line names `specguard rules`, the docs anchor and how to keep a snapshot."""
    with pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, num_drafts=np.array([2, 2]))
    lines = str(caught.value).splitlines()
    code = caught.value.codes[0]
    assert lines[0] == "ScheduledBatch broke 1 rule:"
    assert lines[1] == f"  {caught.value.violations[0].format()}"
    assert lines[2] == (f"  next: specguard rules {code}; "
                        "set SPECGUARD_SNAPSHOT_DIR to keep the object for specguard check")


def test_rules_command_explains_the_codes_a_pointer_names(capsys):
    """`specguard rules SG101` prints that rule with why it exists and the bug it stops."""
    from specguard.cli import main

    assert main(["rules", "sg101"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("SG101  one draft row per decode seq")
    assert out[1].startswith("        why: ") and out[2].startswith("        bug: ATOM #1444")
    assert main(["rules", "SG999"]) == 2
    assert "no rule SG999" in capsys.readouterr().err


def test_rules_command_says_what_full_depth_adds_to_a_rule(capsys):
    """A rule that reads further at full depth says so, with its cost; one that does not
    prints no such line (and its JSON entry holds None)."""
    import json

    from specguard.cli import main

    assert main(["rules", "SG110"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[3].startswith("        at full depth: The default depth reads each seq's "
                             "first and last needed block")
    assert "µs" in out[3]
    assert main(["rules", "SG101"]) == 0
    assert not any("at full depth" in line for line in capsys.readouterr().out.splitlines())
    assert main(["rules", "SG101", "SG110", "--json"]) == 0
    entries = {e["code"]: e for e in json.loads(capsys.readouterr().out)}
    assert entries["SG101"]["at_full_depth"] is None
    assert entries["SG110"]["at_full_depth"] == contracts.REGISTRY["SG110"].deeper
