"""Record the signatures specguard's vLLM adapters wrap, from unpacked vLLM sdists.

Reads each source tree with :mod:`ast` (vLLM is never imported, nothing is installed) and
writes, per release, into ``tests/adapters/data/vllm_signatures.json``:

* the V1 ``GPUModelRunner``'s ``_update_states``, ``_sample``, ``execute_model``,
  ``sample_tokens`` and ``propose_draft_token_ids`` (``vllm/v1/worker/gpu_model_runner.py``);
* the EAGLE/MTP drafter's ``propose`` (``EagleProposer`` of ``vllm/v1/spec_decode/eagle.py``,
  which vLLM builds for ``method="mtp"`` too; the method may come from a base class);
* Model Runner V2's ``GPUModelRunner.prepare_inputs`` and ``sample``
  (``vllm/v1/worker/gpu/model_runner.py``) and its speculator's ``propose`` (the class
  ``init_speculator`` builds for ``method="mtp"``), and which of the attributes the MRV2
  adapter reads the runner assigns;
* whether the V1 runner clamps the ``-1`` draft placeholders in ``input_ids`` before the
  target embeds them (the statement, and where it is), whether the drafter's ``propose``
  takes ``num_speculative_tokens`` first, and what it calls the indices it samples at.

Parameter lists are names in order, without ``self``; ``*args``/``**kwargs`` keep their
stars; a method the release lacks is ``null``. Entries for other releases already in the
file are kept. Get the sdists as ``tools/record_corpus/vllm.py`` says, then, from the
repository root::

    python tools/record_corpus/vllm_signatures.py SRC/vllm-0.11.0 SRC/vllm-0.24.0 ...
    python tools/record_corpus/vllm_signatures.py SRC/vllm-0.33.0 --print   # no writing
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "adapters" / "data" / "vllm_signatures.json"

ABOUT = (
    "Parameter names (in order, without self; null: the release has no such method) of "
    "the vLLM methods specguard's adapters wrap or read, per release, read from the "
    "release's sdist with ast by tools/record_corpus/vllm_signatures.py (which says how "
    "to re-run it). gpu_model_runner: vllm/v1/worker/gpu_model_runner.py's GPUModelRunner. "
    "drafter: EagleProposer.propose (vllm/v1/spec_decode/eagle.py; vLLM's EAGLE and MTP "
    "drafter), propose_defined_in naming the class that defines it. model_runner_v2: "
    "vllm/v1/worker/gpu/model_runner.py's GPUModelRunner, its speculator for method "
    "'mtp' and the runner attributes it assigns (null: no Model Runner V2). "
    "clamps_placeholder_drafts: the V1 runner clamps input_ids to >= 0 before the "
    "target's embedding (clamp_statement and clamp_location say where). "
    "propose_takes_num_speculative_tokens: the drafter's propose has it first. "
    "sample_index_name: the propose parameter holding the indices it samples at."
)

V1_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
V1_METHODS = ("_update_states", "_sample", "execute_model", "sample_tokens",
              "propose_draft_token_ids")
DRAFTER_FILE = "vllm/v1/spec_decode/eagle.py"
DRAFTER_DIR = "vllm/v1/spec_decode"
MRV2_RUNNER = "vllm/v1/worker/gpu/model_runner.py"
MRV2_SPEC_DIR = "vllm/v1/worker/gpu/spec_decode"
MRV2_METHODS = ("prepare_inputs", "sample")
MRV2_ATTRIBUTES = ("num_speculative_steps", "vocab_size", "max_num_reqs",
                   "adaptive_verification", "pcp_manager", "model_state")
SAMPLE_INDEX_NAMES = ("token_indices_to_sample", "last_token_indices")
_CLAMP = re.compile(r"\.clamp_?\(\s*min\s*=\s*0\s*\)")


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def release_of(src: Path) -> str:
    """``__version__`` of the tree's ``vllm/_version.py``, without a local suffix."""
    for node in ast.walk(parse(src / "vllm" / "_version.py")):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
                isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets):
            return str(node.value.value).split("+")[0]
    raise SystemExit(f"{src}/vllm/_version.py sets no __version__")


def params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameter names in order, without ``self``."""
    a = function.args
    names = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg is not None:
        names.append("*" + a.vararg.arg)
    names += [x.arg for x in a.kwonlyargs]
    if a.kwarg is not None:
        names.append("**" + a.kwarg.arg)
    return names[1:] if names[:1] == ["self"] else names


def classes(folder: Path) -> dict[str, tuple[ast.ClassDef, Path]]:
    """Every top-level class under ``folder`` by name (the first one found wins)."""
    found: dict[str, tuple[ast.ClassDef, Path]] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in parse(path).body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, (node, path))
    return found


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def resolve(name: str, known: dict[str, tuple[ast.ClassDef, Path]],
            attribute: str) -> tuple[str, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """``attribute`` of class ``name``, looked up along its bases (depth first, as far as
    the bases are classes of ``known``): the defining class and the function."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop(0)
        if current in seen or current not in known:
            continue
        seen.add(current)
        cls = known[current][0]
        found = method(cls, attribute)
        if found is not None:
            return current, found
        todo[:0] = [ast.unparse(b).split(".")[-1] for b in cls.bases]
    return None


def the_class(path: Path, name: str) -> ast.ClassDef:
    for node in parse(path).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SystemExit(f"{path} defines no class {name}")


def assigned_attributes(cls: ast.ClassDef) -> set[str]:
    """The ``self.<name>`` the class's methods assign."""
    names: set[str] = set()
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) \
                        and part.value.id == "self" and isinstance(part.ctx, ast.Store):
                    names.add(part.attr)
    return names


def clamp_of(cls: ast.ClassDef, source: str) -> tuple[str, str] | None:
    """The first statement of the runner that clamps ``input_ids`` to ``>= 0``, and the
    method it is in with its line."""
    lines = source.splitlines()
    for function in cls.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Expr | ast.Assign):
                continue
            text = ast.unparse(node)
            if "input_ids" in text and _CLAMP.search(text):
                statement = " ".join(lines[i].strip()
                                     for i in range(node.lineno - 1, node.end_lineno or
                                                    node.lineno))
                return statement, f"{cls.name}.{function.name}, line {node.lineno}"
    return None


def mrv2_speculator(src: Path) -> str:
    """The class ``init_speculator`` builds for ``method="mtp"``: the class imported in
    the branch that tests ``method == "mtp"``, else in the one that tests ``use_eagle()``
    (which is true for MTP: 0.17's only speculator is EAGLE's), else MTPSpeculator."""
    tree = parse(src / MRV2_SPEC_DIR / "__init__.py")
    for test in ("== 'mtp'", "use_eagle()"):
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and test in ast.unparse(node.test):
                for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                    if isinstance(inner, ast.ImportFrom):
                        return inner.names[0].name
    return "MTPSpeculator"


def signatures(src: Path) -> dict[str, Any]:
    """Everything the JSON holds for the release in ``src``."""
    source = (src / V1_RUNNER).read_text(encoding="utf-8")
    runner = the_class(src / V1_RUNNER, "GPUModelRunner")
    v1: dict[str, list[str] | None] = {}
    for name in V1_METHODS:
        found = method(runner, name)
        v1[name] = None if found is None else params(found)
    drafters = classes(src / DRAFTER_DIR)
    resolved = resolve("EagleProposer", drafters, "propose")
    if resolved is None:
        raise SystemExit(f"{src / DRAFTER_FILE}: EagleProposer has no propose")
    defined_in, propose = resolved
    propose_params = params(propose)
    entry: dict[str, Any] = {
        "gpu_model_runner": v1,
        "drafter": {"class": "EagleProposer", "propose_defined_in": defined_in,
                    "propose": propose_params},
        "model_runner_v2": None,
    }
    if (src / MRV2_RUNNER).exists():
        mrv2 = the_class(src / MRV2_RUNNER, "GPUModelRunner")
        speculator = mrv2_speculator(src)
        spec_resolved = resolve(speculator, classes(src / MRV2_SPEC_DIR), "propose")
        attributes = assigned_attributes(mrv2)
        entry["model_runner_v2"] = {
            **{name: None if method(mrv2, name) is None else params(method(mrv2, name))
               for name in MRV2_METHODS},
            "speculator": {
                "class": speculator,
                "propose_defined_in": None if spec_resolved is None else spec_resolved[0],
                "propose": None if spec_resolved is None else params(spec_resolved[1])},
            "attributes": {name: name in attributes for name in MRV2_ATTRIBUTES},
        }
    clamp = clamp_of(runner, source)
    entry.update({
        "has_model_runner_v2": entry["model_runner_v2"] is not None,
        "clamps_placeholder_drafts": clamp is not None,
        "clamp_statement": None if clamp is None else clamp[0],
        "clamp_location": None if clamp is None else f"{V1_RUNNER}: {clamp[1]}",
        "propose_takes_num_speculative_tokens":
            propose_params[:1] == ["num_speculative_tokens"],
        "sample_index_name": next((n for n in SAMPLE_INDEX_NAMES if n in propose_params),
                                  None),
    })
    return entry


def dump(value: Any, indent: int = 0) -> str:
    """JSON with one key a line, and each list of names on one line."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(k)}: {dump(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    return json.dumps(value)


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in release.split("."))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vllm_src", nargs="+", help="unpacked vLLM source distributions")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the JSON (default: {OUT})")
    parser.add_argument("--print", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    found = {release_of(Path(s)): signatures(Path(s)) for s in args.vllm_src}
    if args.print:
        print(dump(found))
        return 0
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    releases = {**old.get("releases", {}), **found}
    data = {"about": ABOUT,
            "releases": {r: releases[r] for r in sorted(releases, key=_key)}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dump(data) + "\n", encoding="utf-8")
    print(f"{args.out}: {', '.join(sorted(found, key=_key))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
