"""The generated metadata check has a source: inspect, tracebacks and pdb can show it."""

from __future__ import annotations

import inspect
import linecache
import traceback
import types

import pytest

from specguard import contracts
from specguard.contracts._core._metadata import compile_fast_check


class _Missing:
    """An object with none of the fields: the generated check fails on the first read."""


def _check_of(cls: type[contracts.BoundaryObject]) -> types.FunctionType:
    check = cls.__sg_plan__.compiled_fast_check()
    assert isinstance(check, types.FunctionType)
    return check


def _compiled(cls: type[contracts.BoundaryObject], owner: str) -> types.FunctionType:
    """A fresh check of ``cls``'s fields under the class name ``owner``."""
    check = compile_fast_check(cls.__sg_plan__.fields, owner)
    assert isinstance(check, types.FunctionType)
    return check


def test_getsource_returns_the_generated_code():
    """Both generated functions read back as the code that runs, at their own lines."""
    check = _check_of(contracts.ScheduledBatch)
    general = check.__globals__["general_check"]
    source = inspect.getsource(check)
    assert source.startswith("def fast_check(obj):\n")
    assert "    v = obj.mtp_k\n" in source and "obj.draft_token_ids" in source
    assert inspect.getsource(general).startswith("def general_check(obj):\n")
    lines, first = inspect.getsourcelines(check)
    assert first == check.__code__.co_firstlineno and lines[0] == "def fast_check(obj):\n"
    assert check.__code__.co_filename == \
        "<specguard generated metadata check ScheduledBatch>"


def test_a_traceback_through_the_check_shows_its_line():
    """An error raised inside the generated function prints the line that raised it."""
    check = _check_of(contracts.DraftTokens)
    with pytest.raises(AttributeError) as caught:
        check(_Missing())
    text = "".join(traceback.format_exception(caught.value))
    assert 'File "<specguard generated metadata check DraftTokens>", line ' in text
    assert "in fast_check\n    v = obj.mtp_k\n" in text


def test_the_source_survives_linecache_checkcache():
    """Tracebacks call linecache.checkcache first; the entry has no file to go stale."""
    check = _check_of(contracts.VerifyOutput)
    linecache.checkcache()
    assert inspect.getsource(check).startswith("def fast_check(obj):\n")


def test_two_checks_under_one_name_keep_their_own_sources():
    """A class defined again under the same name gets a source of its own."""
    first = _compiled(contracts.DraftTokens, "Twin")
    second = _compiled(contracts.VerifyOutput, "Twin")
    assert first.__code__.co_filename != second.__code__.co_filename
    assert first.__code__.co_filename.startswith("<specguard generated metadata check Twin")
    assert "obj.draft_token_ids" in inspect.getsource(first)
    assert "obj.draft_token_ids" not in inspect.getsource(second)
    assert "obj.num_accepted" in inspect.getsource(second)
