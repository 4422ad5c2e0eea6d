"""Griffe extension: read the reST touches of specguard's docstrings as Markdown.

The docstrings use ``:class:`X``` roles and ``::`` before literal blocks, which read
well in the source and in ``help()``. On the site a role becomes a code span and ``::``
a colon, so the rendered reference carries no stray markup.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):`~?([^`]+)`")
_LITERAL_BLOCK = re.compile(r"(?<=\S)::$", re.MULTILINE)


def markdown_of(text: str) -> str:
    """``:class:`X``` → ```X```, and a paragraph's closing ``::`` → ``:``."""
    return _LITERAL_BLOCK.sub(":", _ROLE.sub(r"`\1`", text))


class ReSTRoles(griffe.Extension):
    """Rewrite each loaded object's docstring once, before it is rendered."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Called by griffe for every module, class, function and attribute it loads."""
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)
