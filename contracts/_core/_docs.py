"""Read the attribute docstrings of a boundary class: the one place a field is described."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap

__all__ = ["field_docs"]


def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` from the string literal that follows each annotation."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    if not isinstance(body, ast.ClassDef):
        return {}
    docs: dict[str, str] = {}
    statements = body.body
    for current, following in itertools.pairwise(statements):
        if (
            isinstance(current, ast.AnnAssign)
            and isinstance(current.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[current.target.id] = inspect.cleandoc(following.value.value)
    return docs
