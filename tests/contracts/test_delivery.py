"""One reporting path: every route of the contracts delivers through ``_delivery``, which
names, counts, tells the listeners (with the mode), then raises or logs."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import numpy as np
import pytest
from contract_builders import build

from specguard import contracts
from specguard.contracts import Delivery, DeliveryContext, Finding, Mode
from specguard.contracts._core import _values

ROOT = Path(__file__).resolve().parents[2]

SG102 = ("SG102 row width follows mtp_k [DrafterOutput.draft_token_ids, drafter → scheduler]: "
         "draft_token_ids is i64[1,2] but mtp_k=1 (expected mtp_k=1; actual 2) "
         "{mtp_k=1, num_seqs=1}")
HINT = ("  next: specguard rules SG102; set SPECGUARD_SNAPSHOT_DIR to "
        "keep the object for specguard check")


def _broken() -> contracts.DrafterOutput:
    return contracts.DrafterOutput(mtp_k=1, vocab_size=10, seq_ids=np.array([0]),
                                   draft_token_ids=np.array([[0, 1]]))


def _revalidated() -> None:
    out = contracts.DrafterOutput(mtp_k=1, vocab_size=10, seq_ids=np.array([0]),
                                  draft_token_ids=np.array([[0]]))
    object.__setattr__(out, "draft_token_ids", np.array([[0, 1]]))
    contracts.validate(out)


def _reported() -> None:
    contracts.report("EngineThing", [("SG102", Finding("rows are two wide", "rows"))],
                     boundary="here")


def _flushed() -> None:
    torch = pytest.importorskip("torch")
    with contracts.checking(depth="full", device_values="deferred"):
        build(contracts.ScheduledBatch, "torch", state_slots=torch.tensor([0, 1, -1, 3, 4]))
    contracts.flush_deferred(wait=True)


ROUTES = {"construction": (_broken, "DrafterOutput", "SG102"),
          "re-validation": (_revalidated, "DrafterOutput", "SG102"),
          "report": (_reported, "EngineThing", "SG102"),
          "deferred flush": (_flushed, "deferred device check", "SG113")}


@pytest.fixture
def device_path(monkeypatch):
    """CPU tensors take the device path (deferred verdicts); no verdict is left behind."""
    monkeypatch.setattr(_values, "HOST_DEVICE_TYPES", set())
    yield
    with contracts.checking(mode="off"):
        contracts.flush_deferred(wait=True)


@pytest.mark.parametrize("mode", ["strict", "warn"])
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_tells_a_listener_the_mode_then_raises_or_logs(
        route, mode, device_path, caplog):
    """Each route hands its violation to the listeners once, with the mode, counts it
    once, and strict raises what was delivered while warn logs it."""
    run, subject, code = ROUTES[route]
    heard: list[Delivery] = []
    caplog.set_level(logging.WARNING, logger="specguard")
    with contracts.listening(heard.append), contracts.checking(mode=mode):
        if mode == "strict":
            with pytest.raises(contracts.ContractViolation) as caught:
                run()
            assert caught.value.violations == heard[0].violations
            assert isinstance(caught.value, contracts.DeferredViolation) == (
                route == "deferred flush")
        else:
            run()
    [delivery] = heard
    assert (delivery.mode, delivery.subject, [v.code for v in delivery]) == (
        Mode(mode), subject, [code])
    assert delivery.deferred == (route == "deferred flush")
    assert contracts.STATS.violations == 1
    logged = [r.getMessage() for r in caplog.records]
    assert logged == ([] if mode == "strict" else [f"specguard: {delivery[0].format()}"])


def test_a_listener_of_the_old_signature_gets_the_violations():
    """``listener(violations)`` works as it did: a delivery is its violations' sequence."""
    seen: list[contracts.Violation] = []
    with contracts.listening(seen.extend), pytest.raises(contracts.ContractViolation):
        _broken()
    assert [v.format() for v in seen] == [SG102]
    assert all(type(v) is contracts.Violation for v in seen)


def test_listen_lasts_until_stopped():
    """``listen`` adds a listener for good; the function it returns removes it."""
    heard: list[Delivery] = []
    stop = contracts.listen(heard.append)
    try:
        with contracts.checking(mode="warn"):
            _broken()
    finally:
        stop()
    with contracts.checking(mode="warn"):
        _broken()
    assert len(heard) == 1


def test_a_listener_that_keeps_the_object_is_named_on_the_next_line():
    """A listener's ``kept_at`` replaces the hint on how to keep the object."""
    def keeper(delivery: Delivery) -> None:
        delivery.kept_at = "snapshots/DrafterOutput-1.json"

    with pytest.raises(contracts.ContractViolation) as plain:
        _broken()
    with contracts.listening(keeper), pytest.raises(contracts.ContractViolation) as kept:
        _broken()
    assert str(plain.value) == f"DrafterOutput broke 1 rule:\n  {SG102}\n{HINT}"
    assert str(kept.value) == (
        f"DrafterOutput broke 1 rule:\n  {SG102}\n  next: specguard rules SG102; "
        "specguard check snapshots/DrafterOutput-1.json")


def test_a_context_names_seqs_by_the_engine_ids():
    """Inside a context with names, a violation of seq i names request ``names[i]``;
    outside it, and for device verdicts read later, the reason is the rule's own."""
    def broken_row() -> None:
        contracts.DrafterOutput(mtp_k=2, vocab_size=10, seq_ids=np.array([0, 1]),
                                draft_token_ids=np.array([[1, 2], [3, 99]]))

    with contracts.checking(depth="full"):
        with pytest.raises(contracts.ContractViolation) as plain:
            broken_row()
        with DeliveryContext(names=["req-a", "req-b"]), \
                pytest.raises(contracts.ContractViolation) as named:
            broken_row()
    reason = plain.value.violations[0].reason
    assert named.value.violations[0].reason == f"request 'req-b': {reason}"
    assert f"seq 1 at batch position 1: request 'req-b': {reason}" in str(named.value)


def test_device_verdicts_are_not_named_by_the_context_of_the_flush(device_path):
    """A flush inside some block's context is not about that block's seqs."""
    torch = pytest.importorskip("torch")
    with contracts.checking(depth="full", device_values="deferred"):
        build(contracts.ScheduledBatch, "torch", state_slots=torch.tensor([0, 1, -1, 3, 4]))
    with DeliveryContext(names=list("abcde")), \
            pytest.raises(contracts.DeferredViolation) as caught:
        contracts.flush_deferred(wait=True)
    assert caught.value.violations[0].reason == "state slot is -1"


def test_about_is_the_validated_object_or_the_context_that_builds_it():
    """What a keeping listener is offered: the object validated; the context's fields and
    state when the context builds that type; the nearest context describing an object
    for a report without one; fields for lazy ones that fail."""
    abouts: list = []
    state = object()

    def lazy_fails() -> dict:
        raise RuntimeError("cannot read the engine object")

    with contracts.listening(lambda d: abouts.append(d.about())), \
            contracts.checking(mode="warn"):
        out = _broken()
        with DeliveryContext(object_type="DrafterOutput", fields={"mtp_k": 1}, state=state):
            _broken()
        with DeliveryContext(object_type="VllmSchedule", lazy_fields=lambda: {"num_tokens": 3}):
            _broken()  # another type: the object itself
            with DeliveryContext(names=["a"]):
                _reported()  # no object: the nearest context that describes one
        with DeliveryContext(object_type="X", fields={"kept": 1}, lazy_fields=lazy_fails):
            _reported()
        _reported()
    assert abouts[0] == ("DrafterOutput", {f.name: getattr(out, f.name)
                                           for f in dataclasses.fields(out)}, None)
    assert abouts[1] == ("DrafterOutput", {"mtp_k": 1}, state)
    assert abouts[2].type_name == "DrafterOutput"
    assert abouts[3:] == [("VllmSchedule", {"num_tokens": 3}, None), ("X", {"kept": 1}, None),
                          None]


def test_a_violation_is_its_finding_with_the_rule_attached():
    """Every field of a finding reaches the violation, declared once; records list the
    fields in one order, and that order covers every field."""
    finding = Finding("r", "f", position=1, seq_id=2, expected="e", actual="a", token=3)
    violation = contracts.Violation.from_finding(finding, code="SG000", title="t",
                                                 boundary="b", subject="S", bindings={"k": 1})
    for f in dataclasses.fields(Finding):
        assert getattr(violation, f.name) == getattr(finding, f.name) is not None
    from specguard.contracts._core._violation import RECORD_FIELDS
    assert list(violation.to_dict()) == list(RECORD_FIELDS)
    assert set(RECORD_FIELDS) == {f.name for f in dataclasses.fields(contracts.Violation)}


# Where the decision is made, and how a second one would read: a raise of the report,
# a count of it, a warn-mode log line (``warn``), the old listeners' call.
_DECIDING = {
    "_core/_delivery.py": (r"\.from_violations\(", r"STATS\.violations \+="),
    "_core/_warn.py": (r"\bwarn\(",),
}


def _deciding_lines(text: str, patterns: tuple[str, ...]) -> list[str]:
    return [line for line in text.splitlines() if any(re.search(p, line) for p in patterns)]


def test_only_the_delivery_raises_counts_or_logs_violations():
    """No other module raises a violation, counts one or logs one."""
    every = (*(p for group in _DECIDING.values() for p in group), r"\bnotify\(")
    found = []
    for folder in ("contracts", "adapters", "specguard", "runner"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            own = _DECIDING.get(path.relative_to(ROOT / "contracts").as_posix()
                                if folder == "contracts" else "", ())
            patterns = tuple(p for p in every if p not in own)
            found += [f"{path.relative_to(ROOT)}: {line.strip()}"
                      for line in _deciding_lines(path.read_text(encoding="utf-8"), patterns)
                      if not line.lstrip().startswith(("#", "def "))]
    assert found == []


def test_the_scan_sees_a_second_decision():
    """The scan is not vacuous: a copy of the strict branch is found."""
    sample = "    STATS.violations += 1\n    raise ContractViolation.from_violations(s, v)\n"
    assert len(_deciding_lines(sample, _DECIDING["_core/_delivery.py"])) == 2


def test_every_listener_of_the_process_is_on_the_design_page():
    """Each listener registered for the process (not for a block or a test) is named in
    the design page's table, with its module."""
    import specguard.adapters  # noqa: F401  (registers its listeners)
    from specguard.contracts._core import _delivery

    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    named = [f"{listener.__module__}.{listener.__qualname__}"
             for listener in _delivery._listeners if hasattr(listener, "__qualname__")
             and str(getattr(listener, "__module__", "")).startswith("specguard.")]
    assert "specguard.adapters._snapshot_write.keep" in named
    assert [name for name in named if f"`{name}`" not in design] == []


@pytest.mark.parametrize(("value", "link"), [
    ("https://docs.example.org/specguard", " (docs: https://docs.example.org/specguard/rules/#sg102)"),
    ("http://localhost:8000/", " (docs: http://localhost:8000/rules/#sg102)"),
    ("", ""), ("rules.md", ""), ("https://a b/", ""),
])
def test_the_next_line_links_the_published_docs_when_their_url_is_set(monkeypatch, value, link):
    monkeypatch.setenv("SPECGUARD_DOCS_URL", value)
    with pytest.raises(contracts.ContractViolation) as raised:
        _broken()
    assert str(raised.value).endswith(
        f"  next: specguard rules SG102{link}; set SPECGUARD_SNAPSHOT_DIR to keep the "
        "object for specguard check")
