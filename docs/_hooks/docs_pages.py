"""Markdown generated from the contracts themselves, when the site is built.

Every table here is read from live code (``specguard.contracts.BOUNDARY_OBJECTS``, ``REGISTRY``,
``DIMENSIONS``, ``fields_of``, ``field_docs``, ``json_schema``) and every example message
is produced by running the rule on a broken object, so the site cannot drift from what
the code checks and prints. Two entry points:

* :func:`object_pages` -- one page per boundary object, keyed by its path in the site;
* :func:`expand_markers` -- replaces ``<!-- specguard:NAME ARGS -->`` in hand-written pages
  with generated blocks (the rule catalogue, an example message, summary tables).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import json
import logging
import os
import posixpath
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import torch

from specguard import contracts as sg
from specguard._cli.run import EXIT_CODES

# The complete example catalogue: the contracts' rules and the engine adapters'.
from specguard.adapters import examples
from specguard.cli import main as specguard
from specguard.runner.faults import FAULTS

__all__ = [
    "MARKERS",
    "RULES_PAGE",
    "SESSION_WORKLOAD",
    "constructor_example",
    "dimension_rule",
    "example_block",
    "exit_codes_table",
    "expand_markers",
    "fault_table",
    "is_adapter_rule",
    "object_page",
    "object_pages",
    "object_path",
    "rule_catalogue",
    "rules_of",
    "run_session",
    "snapshot_session",
    "story_block",
    "title_of",
]

RULES_PAGE = "rules.md"
_MARKER = re.compile(r"<!--\s*specguard:(?P<name>[\w-]+)(?P<args>[^>]*?)\s*-->")
_DEPTH_NOTE = {
    "metadata": "metadata (checked by default)",
    "essential": "essential (value check, checked by default)",
    "full": "full (value check, `SPECGUARD_DEPTH=full`)",
}
# Checked on every field (SG001) or every array field; listed once per page, not per row.
_EVERY_FIELD = ("SG001",)
_EVERY_ARRAY = ("SG002", "SG003", "SG005")


# --- reading the contracts ----------------------------------------------------------------


def object_path(cls: type) -> str:
    """Where a boundary object's page lives: ``contracts/scheduled-batch.md``."""
    kebab = re.sub(r"(?<!^)(?=[A-Z])", "-", cls.__name__).lower()
    return f"contracts/{kebab}.md"


def boundary_of(cls: type) -> str:
    """The hand-over a boundary object crosses, as the registry names it."""
    return str(getattr(cls, "__sg_boundary__", sg.Boundary.ANY.value))


def dimension_rule(name: str) -> str:
    """The rule reported when fields disagree on dimension ``name``."""
    known = sg.DIMENSIONS.get(name)
    return known.rule if known else "SG004"


def _dims_of(cls: type[sg.BoundaryObject]) -> dict[str, list[str]]:
    """Each named dimension of ``cls`` and the fields that use (or bind) it."""
    used: dict[str, list[str]] = {}
    for spec in _fields_in_order(cls):
        if isinstance(spec, sg.ScalarField):
            if spec.binds:
                used.setdefault(spec.name, []).append(spec.name)
            continue
        for axis in spec.axes:
            if axis.name and spec.name not in used.setdefault(axis.name, []):
                used[axis.name].append(spec.name)
    return used


_DECLARED: dict[type, tuple[sg.ArrayField | sg.ScalarField, ...]] = {}


def _fields_in_order(cls: type[sg.BoundaryObject]) -> tuple[sg.ArrayField | sg.ScalarField, ...]:
    """Fields in the order the class declares them (validation puts scalars first).

    Read once per class and build: the declaration order comes from parsing its source.
    """
    if cls not in _DECLARED:
        order = {name: i for i, name in enumerate(sg.field_docs(cls))}
        _DECLARED[cls] = tuple(sorted(sg.fields_of(cls),
                                      key=lambda spec: order.get(spec.name, len(order))))
    return _DECLARED[cls]


def rules_of(cls: type[sg.BoundaryObject]) -> list[sg.Rule]:
    """Every rule that can fire on ``cls``, in code order.

    Rules naming the class apply; so do rules for every object (``*``), except that a
    rule owning a dimension applies only where the class uses that dimension, and a
    structural rule of one boundary only to objects crossing that boundary.
    """
    owned = {dimension_rule(name) for name in _dims_of(cls)}
    return [rule for _, rule in sorted(sg.REGISTRY.items()) if _applies(rule, cls, owned)]


def _applies(rule: sg.Rule, cls: type[sg.BoundaryObject], owned: set[str]) -> bool:
    if cls.__name__ in rule.applies_to:
        return True
    if "*" not in rule.applies_to:
        return False
    if rule.code in {d.rule for d in sg.DIMENSIONS.values()} | {"SG004"}:
        return rule.code in owned
    if rule.check is None and rule.boundary is not sg.Boundary.ANY:
        return bool(rule.boundary.value == boundary_of(cls))
    return True


def _field_rules(cls: type[sg.BoundaryObject], spec: sg.ArrayField | sg.ScalarField) -> list[str]:
    codes: list[str] = []
    if isinstance(spec, sg.ScalarField):
        if spec.minimum is not None:
            codes.append("SG006")
        if spec.binds:
            codes.append(dimension_rule(spec.name))
    else:
        codes.extend(dimension_rule(axis.name) for axis in spec.axes if axis.name)
    codes.extend(r.code for r in rules_of(cls) if spec.name in r.fields)
    return sorted(set(codes))


# --- small markdown helpers ---------------------------------------------------------------


def _cell(text: str) -> str:
    """One table cell: a single line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _link(page: str, target: str, anchor: str = "") -> str:
    """A relative link from ``page`` to ``target`` (both paths inside docs/)."""
    if target == page:
        return f"#{anchor}" if anchor else "#"
    relative = posixpath.relpath(target, posixpath.dirname(page) or ".")
    return f"{relative}#{anchor}" if anchor else relative


def _rule_link(page: str, code: str) -> str:
    """``[SG101](../rules.md#sg101 "its title")``: the title shows on hover."""
    title = sg.REGISTRY[code].title.replace('"', "'")
    return f'[{code}]({_link(page, RULES_PAGE, code.lower())} "{title}")'



def _object_link(page: str, name: str) -> str:
    by_name = {cls.__name__: cls for cls in sg.BOUNDARY_OBJECTS}
    if name not in by_name:
        return f"`{name}`"
    return f"[{name}]({_link(page, object_path(by_name[name]))})"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def _docstring(cls: type) -> tuple[str, str]:
    """The class docstring as (first paragraph, the rest)."""
    text = (cls.__doc__ or "").strip()
    lead, _, rest = text.partition("\n\n")
    return " ".join(lead.split()), _dedent(rest)


def _dedent(text: str) -> str:
    return inspect.cleandoc(text) if text else ""


# --- one page per boundary object ---------------------------------------------------------


def _dtype_text(spec: sg.ArrayField | sg.ScalarField) -> str:
    if isinstance(spec, sg.ScalarField):
        name = spec.type.__name__
        return f"`{name}` or `None`" if spec.optional else f"`{name}`"
    names = ", ".join(f"`{d}`" for d in sorted(spec.dtypes))
    return f"{names} or `None`" if spec.optional else names


def _shape_text(spec: sg.ArrayField | sg.ScalarField) -> str:
    if isinstance(spec, sg.ScalarField):
        return "scalar"
    return "`" + spec.shape_text + "`"


def _required_text(spec: sg.ArrayField | sg.ScalarField) -> str:
    return "no, default `None`" if spec.optional else "yes"


def _fields_section(cls: type[sg.BoundaryObject], page: str) -> str:
    docs = sg.field_docs(cls)
    rows = []
    for spec in _fields_in_order(cls):
        rules = " ".join(_rule_link(page, code) for code in _field_rules(cls, spec))
        rows.append((f"`{spec.name}`", _required_text(spec), _dtype_text(spec),
                     _shape_text(spec), docs.get(spec.name, ""), rules or "—"))
    every = ", ".join(_rule_link(page, c) for c in _EVERY_FIELD)
    arrays = ", ".join(_rule_link(page, c) for c in _EVERY_ARRAY)
    note = (f"Every field is checked for its type ({every}); every array field also for "
            f"its dtype, rank and backend ({arrays}). The last column lists the rules "
            "specific to the field.")
    table = _table(("Field", "Required", "dtype", "Shape", "Meaning", "Rules"), rows)
    return f"## Fields\n\n{note}\n\n{table}\n"


def _dimensions_section(cls: type[sg.BoundaryObject], page: str) -> str:
    rows = []
    for name, users in _dims_of(cls).items():
        known = sg.DIMENSIONS.get(name)
        rows.append((f"`{name}`", known.meaning if known else "",
                     ", ".join(f"`{u}`" for u in users), _rule_link(page, dimension_rule(name))))
    table = _table(("Dimension", "Counts", "Used by", "Disagreement reports"), rows)
    return ("## Dimensions\n\nA named dimension has one length across every field that "
            "uses it; the first field that fixes it binds it, and a later field that "
            f"disagrees reports the dimension's own rule.\n\n{table}\n")


def _rules_section(cls: type[sg.BoundaryObject], page: str) -> str:
    rows = [(_rule_link(page, r.code), r.title, r.boundary.value, r.depth.value)
            for r in rules_of(cls)]
    table = _table(("Code", "Rule", "Boundary", "Depth"), rows)
    return f"## Rules\n\nEvery rule that can fire on a `{cls.__name__}`:\n\n{table}\n"


def _schema_section(cls: type[sg.BoundaryObject]) -> str:
    schema = json.dumps(sg.json_schema(cls), indent=2, ensure_ascii=False)
    block = _indent(f"```json\n{schema}\n```")
    return (f"## JSON Schema\n\nThe same fields for other languages and tools: arrays as "
            "nested lists, with `x-dtype` and `x-shape` (named dimensions) per field, "
            f"from `specguard.contracts.json_schema({cls.__name__})`.\n\n"
            f'??? example "JSON Schema of {cls.__name__}"\n\n{block}\n')


def _value_code(value: object) -> str:
    """Python source that rebuilds a clean object's field value (numpy or a scalar)."""
    if not isinstance(value, np.ndarray):
        return repr(value)
    if value.dtype == np.bool_:
        return f"np.array({value.tolist()!r})"
    dtype = f"np.{value.dtype}"
    flat = value.reshape(-1)
    if value.ndim == 1 and flat.size > 8 and np.array_equal(np.diff(flat), np.ones(flat.size - 1)):
        return f"np.arange({int(flat[0])}, {int(flat[-1]) + 1}, dtype={dtype})"
    return f"np.array({value.tolist()!r}, dtype={dtype})"


def constructor_example(cls: type[sg.BoundaryObject]) -> str:
    """A runnable construction of the docs' clean ``cls``: every required field, by name."""
    clean = examples.CLEAN[cls.__name__]()
    specs = _fields_in_order(cls)
    variable = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
    lines = ["import numpy as np", f"from specguard.contracts import {cls.__name__}", "",
             f"{variable} = {cls.__name__}("]
    lines += [f"    {spec.name}={_value_code(getattr(clean, spec.name))},"
              for spec in specs if not spec.optional]
    lines.append(")")
    return "\n".join(lines)


def _constructor_section(cls: type[sg.BoundaryObject]) -> str:
    optional = [spec for spec in _fields_in_order(cls) if spec.optional]
    docs = sg.field_docs(cls)
    listed = "\n".join(f"- `{spec.name}`: {' '.join(docs.get(spec.name, '').split())}"
                       for spec in optional)
    note = ("Every field is keyword-only and required." if not optional else
            f"Every field is keyword-only. Optional fields, left out above, default to "
            f"`None`:\n\n{listed}")
    return (f"## Constructing one\n\nThe clean `{cls.__name__}` of the rule catalogue's "
            "examples, built field by field; construction is the check.\n\n"
            f"```python\n{constructor_example(cls)}\n```\n\n{note}\n")


def object_page(cls: type[sg.BoundaryObject]) -> str:
    """The generated page of one boundary object."""
    page = object_path(cls)
    lead, rest = _docstring(cls)
    facts = _table(("Crosses", "Import", "API"), [(
        boundary_of(cls),
        f"`from specguard.contracts import {cls.__name__}`",
        f"[`contracts.{cls.__name__}`][specguard.contracts.{cls.__name__}]",
    )])
    parts = [
        f"# {cls.__name__}\n",
        f"{lead}\n" + (f"\n{rest}\n" if rest else ""),
        f"{facts}\n",
        _constructor_section(cls),
        _fields_section(cls, page),
        _dimensions_section(cls, page),
        _rules_section(cls, page),
        _schema_section(cls),
    ]
    return "\n".join(parts)


def object_pages() -> dict[str, Callable[[], str]]:
    """``{path in docs/: page builder}`` for every boundary object, in step order."""
    return {object_path(cls): functools.partial(object_page, cls) for cls in sg.BOUNDARY_OBJECTS}


def title_of(path: str) -> str:
    """The nav title of a generated object page: the class name."""
    return next(cls.__name__ for cls in sg.BOUNDARY_OBJECTS if object_path(cls) == path)


# --- the rule catalogue -------------------------------------------------------------------


def _checked_on(rule: sg.Rule, page: str) -> str:
    names = [cls.__name__ for cls in sg.BOUNDARY_OBJECTS
             if any(r.code == rule.code for r in rules_of(cls))]
    if not names:  # an adapter's own object, built from the engine's state
        names = [n for n in rule.applies_to if n != "*"]
    return ", ".join(_object_link(page, n) for n in names) or "—"


def is_adapter_rule(rule: sg.Rule) -> bool:
    """Whether an engine adapter (not the contracts) declared the rule."""
    module = getattr(rule.check, "__module__", "") or ""
    return module.startswith("specguard.adapters.")


def example_block(code: str) -> str:
    """The example of a rule: what is wrong, then the message the live code raises."""
    if code in examples.NO_EXAMPLE:
        reason = _indent(examples.NO_EXAMPLE[code])
        return f'!!! note "No example object"\n\n{reason}\n'
    example = examples.EXAMPLES[code]
    message = examples.example_message(code)
    return f"**Example**: {example.mistake}.\n\n```text\n{message}\n```\n"


def story_block(name: str) -> str:
    """The message one of the motivating crashes raises once it crosses a contract."""
    story = examples.STORIES[name]
    message = str(examples.violation_of(story))
    return f"```text\n{message}\n```\n"


@contextlib.contextmanager
def _snapshots_into(folder: str) -> Iterator[None]:
    """Adapters write snapshots into ``folder`` for the block; their log lines are muted."""
    from specguard.adapters import snapshots

    previous = os.environ.get(snapshots.ENV_DIR)
    os.environ[snapshots.ENV_DIR] = folder
    log = logging.getLogger("specguard")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)
        if previous is None:
            del os.environ[snapshots.ENV_DIR]
        else:
            os.environ[snapshots.ENV_DIR] = previous


def snapshot_session(story: str = "atom-adapter") -> str:
    """An adapter's violation written to a snapshot, then ``specguard check`` on the file."""
    with tempfile.TemporaryDirectory() as folder:
        with _snapshots_into(folder):
            examples.violation_of(examples.STORIES[story])
        written = sorted(Path(folder).glob("*.json"))
        if not written:
            raise LookupError(f"the {story} example wrote no snapshot")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = specguard(["check", str(written[0])])
        output = printed.getvalue().replace(str(written[0]), written[0].name)
    return (f"```console\n$ specguard check {written[0].name}\n{output}"
            f"$ echo $?\n{status}\n```\n")


def _rule_section(rule: sg.Rule, page: str) -> str:
    owned = [f"`{d.name}`" for d in sg.DIMENSIONS.values() if d.rule == rule.code]
    fields = ", ".join(f"`{f}`" for f in sorted(rule.fields))
    if owned:
        fields = "dimension " + ", ".join(owned)
    facts = _table(("Boundary", "Depth", "Checked on", "Looks at"), [(
        rule.boundary.value, _DEPTH_NOTE.get(rule.depth.value, rule.depth.value),
        _checked_on(rule, page), fields or "—",
    )])
    bug = _indent(" ".join(rule.bug.split()))
    deeper = (f'!!! note "At full depth"\n\n{_indent(" ".join(rule.deeper.split()))}\n'
              if rule.deeper else "")
    return "\n".join(part for part in [
        f"### {rule.code} · {rule.title} {{ #{rule.code.lower()} }}\n",
        f"{facts}\n",
        f"{' '.join(rule.why.split())}\n",
        deeper,
        f'!!! bug "The bug it stops"\n\n{bug}\n',
        example_block(rule.code),
    ] if part)


def rule_catalogue(page: str = RULES_PAGE) -> str:
    """Every registered rule: a summary table, then one section per rule.

    The contracts' rules are grouped by boundary, in step order; the engine adapters'
    rules (registered when ``adapters`` is imported) follow in a group of their own.
    """
    ordered = sorted(sg.REGISTRY.values(), key=lambda r: r.code)
    summary = _table(("Code", "Rule", "Boundary", "Depth"), [
        (f"[{r.code}](#{r.code.lower()})", r.title, r.boundary.value, r.depth.value)
        for r in ordered
    ])
    parts = [f"## All rules\n\n{summary}\n"]
    own = [r for r in ordered if not is_adapter_rule(r)]
    for boundary in sg.Boundary:
        members = [r for r in own if r.boundary is boundary]
        if members:
            heading = "Any boundary" if boundary is sg.Boundary.ANY else boundary.value
            parts.append(f"## {heading}\n")
            parts.extend(_rule_section(r, page) for r in members)
    adapter_rules = [r for r in ordered if is_adapter_rule(r)]
    if adapter_rules:
        guide = _link(page, "guides/engines.md")
        parts.append(f"## Engine adapters\n\n{_ADAPTER_RULES.format(guide=guide)}\n")
        parts.extend(_rule_section(r, page) for r in adapter_rules)
    return "\n".join(parts)


_ADAPTER_RULES = (
    "These rules belong to `adapters`, which registers them when it is imported. They check "
    "what a single object cannot show: how a step continues from the one before, what "
    "data-parallel ranks must agree on, and the conventions of one engine. Each checks an "
    "object the adapter builds from the engine's own state (the *Checked on* column), and "
    "each example drives the adapter that builds it: see [adapting vLLM and ATOM]({guide})."
)


# --- the reference engine -----------------------------------------------------------------


def fault_table(page: str) -> str:
    """The reference engine's fault catalogue, a row per ``specguard.runner.faults.FAULTS``."""
    rows = []
    for fault in FAULTS.values():
        rules = " or ".join(_rule_link(page, code) for code in fault.rules)
        caught = f"{rules} on {_object_link(page, fault.subject)}"
        rows.append((f"`{fault.name}`", fault.summary, fault.origin, caught, fault.unguarded))
    header = ("Fault", "What it does", "The real bug", "Caught by", "With contracts off")
    return _table(header, rows) + "\n"


def exit_codes_table(page: str) -> str:
    """The exit statuses of ``specguard run``, from ``specguard._cli.run.EXIT_CODES``."""
    return _table(("Status", "Meaning"),
                  [(f"`{code}`", text) for code, text in EXIT_CODES.items()]) + "\n"


#: Four requests, one of them chunked: small enough to run while the site builds.
SESSION_WORKLOAD = ("--requests", "4", "--min-prompt", "8", "--max-prompt", "150",
                    "--max-tokens", "12", "--max-batched-tokens", "64", "--max-num-seqs", "4",
                    "--num-blocks", "64", "--no-progress")


def run_session(page: str, fault: str, mode: str = "strict") -> str:
    """``specguard run`` with ``fault`` under contract ``mode``, run now, as a console session.

    Timing lines (throughput, contract time) vary from build to build; the rest is
    deterministic: the workload and the model are seeded.
    """
    args = [*SESSION_WORKLOAD, "--fault", fault, "--contracts", mode]
    threads = torch.get_num_threads()  # the run sets its own; the build keeps its own
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            status = specguard(["run", *args])
    finally:
        torch.set_num_threads(threads)
    command = " ".join(["specguard run", *args])
    return f"```console\n$ {command}\n{printed.getvalue()}$ echo $?\n{status}\n```\n"


# --- summary tables for hand-written pages ------------------------------------------------


def _objects_table(page: str) -> str:
    rows = []
    for cls in sg.BOUNDARY_OBJECTS:
        lead, _ = _docstring(cls)
        rows.append((_object_link(page, cls.__name__), boundary_of(cls), lead,
                     str(len(rules_of(cls)))))
    return _table(("Object", "Crosses", "What it is", "Rules"), rows) + "\n"


def _dimensions_table(page: str) -> str:
    rows = []
    for dim in sg.DIMENSIONS.values():
        users = [_object_link(page, cls.__name__) for cls in sg.BOUNDARY_OBJECTS
                 if dim.name in _dims_of(cls)
                 or any(spec.name == dim.name for spec in sg.fields_of(cls))]
        rows.append((f"`{dim.name}`", dim.meaning, _rule_link(page, dim.rule),
                     ", ".join(users) or "—"))
    return _table(("Dimension", "Counts", "Disagreement reports", "Used by"), rows) + "\n"


def _boundaries_table(page: str) -> str:
    rows = []
    for boundary in sg.Boundary:
        if boundary is sg.Boundary.ANY:
            continue
        objects = [c for c in sg.BOUNDARY_OBJECTS if boundary_of(c) == boundary.value]
        own = [r.code for r in sorted(sg.REGISTRY.values(), key=lambda r: r.code)
               if r.boundary is boundary]
        rows.append((boundary.value,
                     ", ".join(_object_link(page, c.__name__) for c in objects) or "—",
                     " ".join(_rule_link(page, code) for code in own) or "—"))
    return _table(("Hand-over", "Object that crosses it", "Rules of this hand-over"), rows) + "\n"


def _rule_count(page: str) -> str:
    return str(len(sg.REGISTRY))


def _conformance(page: str) -> str:
    """The Conformance page's tables, from the corpus files (docs/_hooks/conformance_page.py)."""
    import sys

    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from conformance_page import conformance_tables

    return conformance_tables(page)


MARKERS: dict[str, Callable[..., str]] = {
    "rules": lambda page: rule_catalogue(page),
    "example": lambda page, code: example_block(code),
    "story": lambda page, name: story_block(name),
    "snapshot-check": lambda page, story="atom-adapter": snapshot_session(story),
    "objects": _objects_table,
    "dimensions": _dimensions_table,
    "boundaries": _boundaries_table,
    "rule-count": _rule_count,
    "faults": fault_table,
    "exit-codes": exit_codes_table,
    "run-session": run_session,
    "conformance": _conformance,
}


def expand_markers(markdown: str, page: str) -> str:
    """Replace every ``<!-- specguard:NAME ARGS -->`` in a page with its generated block."""

    def expand(match: re.Match[str]) -> str:
        name, args = match["name"], match["args"].split()
        if name not in MARKERS:
            raise ValueError(f"{page}: unknown marker specguard:{name}")
        return MARKERS[name](page, *args)

    return _MARKER.sub(expand, markdown)
