"""Huge integers, sparse tensors, lying ndarray subclasses and long strings in any field.

Nothing escapes as a foreign exception, nothing invalid passes, and every message stays
short, on the host and on the device path (CPU tensors treated as accelerator ones).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hostile_values import (
    HIDDEN,
    HOSTILE_ARRAY_VALUES,
    HUGE_IDS,
    HUGE_SCALARS,
    MESSAGE_LIMIT,
    SKIP,
    lying,
    lying_with_hidden,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies.cases import Case, MappingCase
from strategies.valid import mapping_cases, valid_cases

from specguard import contracts
from specguard.contracts._core import _values

CLASSES = contracts.BOUNDARY_OBJECTS
_EXAMPLES = max(10, settings().max_examples // 3)


@contextlib.contextmanager
def _device_path(on: bool) -> Iterator[None]:
    """With ``on``, CPU tensors take the accelerator path and verdicts are read at once."""
    saved = _values.HOST_DEVICE_TYPES
    if on:
        _values.HOST_DEVICE_TYPES = set()
    try:
        with contracts.checking(device_values="sync"):
            yield
    finally:
        _values.HOST_DEVICE_TYPES = saved


def _outcome(build: Any, *, device: bool = False, **config: str) -> str:
    """``"violation"``, ``"passed"``, or what went wrong (a foreign error, a long message)."""
    with _device_path(device), contracts.checking(mode="strict", **config):
        try:
            build()
        except contracts.ContractViolation as error:
            longest = max((len(v.format()) for v in error.violations), default=0)
            return "violation" if longest <= MESSAGE_LIMIT else f"message of {longest} chars"
        except Exception as error:
            return f"{type(error).__name__}: {str(error)[:200]}"
    return "passed"


def _scalar_names(cls: type) -> list[str]:
    return [s.name for s in contracts.fields_of(cls) if isinstance(s, contracts.ScalarField)]


def _arrays(cls: type) -> list[contracts.ArrayField]:
    return [s for s in contracts.fields_of(cls) if isinstance(s, contracts.ArrayField)]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=_EXAMPLES)
@given(data=st.data(), device=st.booleans())
def test_huge_scalars_in_any_field_pass_or_violate(cls: type, data: st.DataObject,
                                                   device: bool) -> None:
    """Every scalar field given an integer past every width: a violation or a pass."""
    case: Case = data.draw(valid_cases(cls))
    if device:
        case = dataclasses.replace(case, backend="torch")
    escapes = []
    for name in _scalar_names(cls):
        for label, huge in HUGE_SCALARS.items():
            outcome = _outcome(lambda: case.with_values(**{name: huge}).build(),  # noqa: B023
                               device=device, depth="full", collect="all")
            if outcome not in ("violation", "passed"):
                escapes.append(f"{name}={label}: {outcome}")
    assert not escapes, "\n".join(escapes)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=_EXAMPLES)
@given(data=st.data())
def test_hostile_array_values_are_violations(cls: type, data: st.DataObject) -> None:
    """Sparse tensors, unsigned -1s and 10 MB strings in any array field are refused,
    at either depth, with a short message."""
    case: Case = data.draw(valid_cases(cls))
    kwargs = case.kwargs()
    escapes = []
    for spec in _arrays(cls):
        base = kwargs[spec.name]
        if base is None:
            continue
        for kind, make in HOSTILE_ARRAY_VALUES.items():
            bad = make(base, spec)
            if bad is SKIP:
                continue
            for depth in ("metadata", "full"):
                outcome = _outcome(lambda: cls(**{**kwargs, spec.name: bad}),  # noqa: B023
                                   depth=depth, collect="all")
                if outcome != "violation":
                    escapes.append(f"{spec.name} <- {kind} ({depth}): {outcome}")
    assert not escapes, "\n".join(escapes)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=_EXAMPLES)
@given(data=st.data())
def test_lying_subclasses_cannot_hide_a_bad_value(cls: type, data: st.DataObject) -> None:
    """An ndarray subclass whose reductions answer 0 hides -2 in vain at full depth."""
    case: Case = data.draw(valid_cases(cls, min_seqs=1, min_decode=1))
    kwargs = {name: value for name, value in case.kwargs().items()}
    kwargs = {name: value.numpy() if hasattr(value, "numpy") and not isinstance(
        value, np.ndarray) else value for name, value in kwargs.items()}
    for spec in _arrays(cls):
        if kwargs[spec.name] is None:
            continue
        bad = lying_with_hidden(kwargs[spec.name], spec)
        if bad is SKIP:
            continue
        outcome = _outcome(lambda: cls(**{**kwargs, spec.name: bad}),  # noqa: B023
                           depth="full", collect="all")
        assert outcome == "violation", f"{spec.name} hiding {HIDDEN}: {outcome}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_lying_subclasses_holding_valid_values_pass(cls: type, data: st.DataObject) -> None:
    """Every array a lying subclass of valid values: full depth reads the truth and passes."""
    case: Case = data.draw(valid_cases(cls))
    kwargs = dict(case.kwargs())
    for spec in _arrays(cls):
        if kwargs[spec.name] is not None:
            kwargs[spec.name] = lying(kwargs[spec.name])
    assert _outcome(lambda: cls(**kwargs), depth="full", collect="all") == "passed"


@settings(max_examples=_EXAMPLES)
@given(case=mapping_cases(min_seqs=1, max_seqs=64))
def test_from_mapping_with_huge_integers_passes_or_violates(case: MappingCase) -> None:
    """Huge seq ids, draft ids, keys, placeholders and mtp_k: never a foreign error."""
    ids = list(np.asarray(case.seq_ids).tolist())
    escapes = []
    for label, huge in HUGE_IDS.items():
        calls = {
            "seq id": dataclasses.replace(case, seq_ids=[*ids[1:], huge], drafts={}),
            "draft": dataclasses.replace(case, drafts={ids[0]: [huge]}),
            "key": dataclasses.replace(case, drafts={huge: [0]}),
            "placeholder": dataclasses.replace(case, placeholder=huge),
            "mtp_k": dataclasses.replace(case, mtp_k=huge),
            "vocab_size": dataclasses.replace(case, vocab_size=huge),
        }
        for where, call in calls.items():
            for device in (False, True):
                outcome = _outcome(call.build, device=device, depth="full", collect="all")
                if outcome not in ("violation", "passed"):
                    escapes.append(f"{where}={label} (device={device}): {outcome}")
    assert not escapes, "\n".join(escapes)
