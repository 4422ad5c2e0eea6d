"""``specguard.adapters.guard``: named arguments and return values validated at a method's edge."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from contract_builders import build, kwargs

from specguard import contracts
from specguard.adapters import guard

SB, VO = contracts.ScheduledBatch, contracts.VerifyOutput


class Runner:
    """A stand-in runner whose step takes a batch and returns verified rows."""

    @guard(VO, batch=SB, step=int)
    def execute(self, batch, step=0, *, result=None):
        return build(VO) if result is None else result


def test_clean_arguments_and_result_pass():
    """A valid batch, an int step and a valid VerifyOutput go through untouched."""
    out = Runner().execute(build(SB), 3)
    assert isinstance(out, VO)
    assert contracts.STATS.checks >= 3


def test_wrong_argument_type_is_sg001():
    """A dict where a ScheduledBatch belongs is SG001 naming the method and parameter."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "Runner.execute broke 1 rule:\n  SG001 field has the declared type "
        "[Runner.execute.batch, scheduler → runner]: expected ScheduledBatch, got dict "
        "(expected ScheduledBatch; actual dict)"
    )):
        Runner().execute(kwargs(SB))


def test_keyword_arguments_are_checked_too():
    """The parameter is found whether it is passed by position or by name."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "[Runner.execute.batch, scheduler → runner]"
    )):
        Runner().execute(batch="not a batch")


def test_batch_mutated_after_construction_is_revalidated():
    """Engines mutate arrays in place; the guard re-validates the object it is handed."""
    batch = build(SB)
    batch.token_ids[4] = -1
    with contracts.checking(depth="full"), pytest.raises(
        contracts.ContractViolation, match=re.escape("token 4: token id is -1")
    ):
        Runner().execute(batch)


def test_return_value_is_checked():
    """A result that is not the declared boundary object is SG001 on the return value."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG001 field has the declared type [Runner.execute.return, verifier → drafter]: "
        "expected VerifyOutput, got list (expected VerifyOutput; actual list)"
    )):
        Runner().execute(build(SB), result=[1, 2])


def test_type_hint_argument_is_checked_by_beartype():
    """A plain hint such as int is enforced: a str step is SG001."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG001 field has the declared type [Runner.execute.step, any boundary]: "
        "expected int, got '3' (expected int; actual str)"
    )):
        Runner().execute(build(SB), "3")  # pyright: ignore[reportArgumentType]


def test_generic_hint_is_checked():
    """Parametrised hints such as list[int] are checked (beartype samples one element)."""

    @guard(ids=list[int])
    def take(ids):
        return len(ids)

    assert take([1, 2]) == 2
    with pytest.raises(contracts.ContractViolation, match=re.escape("expected list[int]")):
        take(["1", "2"])


def test_view_spec_builds_and_validates():
    """A callable spec builds the boundary object from the engine's own form."""

    @guard(raw=lambda raw: SB(**raw))
    def schedule(raw):
        return raw

    assert schedule(kwargs(SB)) is not None
    with pytest.raises(contracts.ContractViolation, match="SG104"):
        schedule(kwargs(SB, token_ids=np.arange(3)))


def test_missing_parameter_name_is_a_type_error_at_decoration():
    """Naming a parameter the function lacks fails when the decorator runs."""
    with pytest.raises(TypeError, match=re.escape("@guard names parameters ['batch'] that")):
        guard(batch=SB)(lambda batsh: batsh)


def test_missing_parameter_name_fails_even_with_checks_off():
    """The typo is caught although the decorator would return the function unchanged."""
    with contracts.checking(mode="off"), pytest.raises(TypeError, match="lacks"):
        guard(batch=SB)(lambda other: other)


def test_spec_that_is_not_a_hint_is_a_type_error():
    """A spec that is no boundary class, view or type hint fails at decoration."""
    with pytest.raises(TypeError, match=re.escape("batch=3 is not a type hint")):
        guard(batch=3)(lambda batch: batch)


def test_variadic_parameters_are_refused():
    """*args and **kwargs cannot be checked by name, so naming them is an error."""
    with pytest.raises(TypeError, match=re.escape("variadic parameters ['args']")):
        guard(args=int)(lambda *args: args)


def test_warn_mode_logs_and_calls_through(caplog):
    """In warn mode a bad argument is logged and the method still runs."""
    with caplog.at_level(logging.WARNING, logger="specguard"), contracts.checking(mode="warn"):
        out = Runner().execute(build(SB), "3")  # pyright: ignore[reportArgumentType]
    assert isinstance(out, VO)
    assert "SG001" in caplog.records[0].getMessage()


def test_mode_switched_off_after_decoration_skips_checks():
    """A guarded method checks nothing while a checking(mode="off") block is open."""
    with contracts.checking(mode="off"):
        assert Runner().execute(  # a str batch and step: contracts off lets them through
            "not a batch", "3", result="x") == "x"  # pyright: ignore[reportArgumentType]


def test_guarded_method_keeps_its_identity():
    """functools.wraps keeps the name and docstring, and the original is reachable."""
    assert Runner.execute.__name__ == "execute"
    original = getattr(Runner.execute, "__sg_guarded__")  # noqa: B009 - set by guard
    assert original.__qualname__ == "Runner.execute"


class OneArgument:
    """Methods with one checked argument and no result spec: the specialised wrapper."""

    @guard(batch=SB)
    def positional(self, batch=None):
        return batch

    @guard(batch=SB)
    def keyword_only(self, *, batch=None):
        return batch

    @guard(step=int)
    def hinted(self, step):
        return step




@pytest.mark.parametrize("call", [
    pytest.param(lambda one, value: one.positional(value), id="by-position"),
    pytest.param(lambda one, value: one.positional(batch=value), id="by-name"),
    pytest.param(lambda one, value: one.keyword_only(batch=value), id="keyword-only"),
])
def test_one_checked_argument_is_found_however_it_is_passed(call):
    """Positional, named or keyword-only: the clean batch passes, a string is SG001."""
    batch = build(SB)
    assert call(OneArgument(), batch) is batch
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "batch, scheduler → runner]: expected ScheduledBatch, got 'not a batch' "
            "(expected ScheduledBatch; actual str)")):
        call(OneArgument(), "not a batch")


def test_one_checked_argument_left_to_its_default_is_not_checked():
    """An argument the caller did not pass is the function's own default: nothing to check."""
    before = contracts.STATS.checks
    assert OneArgument().positional() is None
    assert OneArgument().keyword_only() is None
    assert contracts.STATS.checks == before


def test_one_checked_argument_counts_each_clean_hand_over():
    """The inline fast path still counts the object it checked."""
    batch = build(SB)
    with contracts.checking(depth="metadata"):
        before = contracts.STATS.checks
        OneArgument().positional(batch)
    assert contracts.STATS.checks == before + 1


def test_one_checked_argument_with_broken_metadata_is_named():
    """At metadata depth a batch whose arrays disagree leaves the fast path with its rule."""
    batch = build(SB)
    object.__setattr__(batch, "context_lens", batch.context_lens[:-1])
    with contracts.checking(depth="metadata"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG105 one entry per seq in every per-seq array [ScheduledBatch.context_lens, "
                "scheduler → runner]: seq 44 at batch position 4: that seq has no entry")):
        OneArgument().positional(batch)


def test_one_checked_argument_at_full_depth_runs_the_value_rules():
    """Off the metadata depth the fast path is not taken: value rules see the batch."""
    batch = build(SB)
    batch.token_ids[4] = -1
    with contracts.checking(depth="metadata"):
        assert OneArgument().positional(batch) is batch
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape("token 4: token id is -1")):
        OneArgument().positional(batch)


def test_one_checked_hint_is_checked_by_beartype():
    """A single type-hint spec goes through beartype, never the boundary fast path."""
    assert OneArgument().hinted(3) == 3
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "[OneArgument.hinted.step, any boundary]: expected int, got '3' "
            "(expected int; actual str)")):
        OneArgument().hinted("3")


def test_one_checked_argument_skips_checks_while_the_mode_is_off():
    """A checking(mode="off") block turns the specialised wrapper off too."""
    with contracts.checking(mode="off"):
        assert OneArgument().positional("not a batch") == "not a batch"
