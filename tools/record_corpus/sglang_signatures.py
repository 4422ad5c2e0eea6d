"""Record the signatures specguard's SGLang installer wraps, from unpacked SGLang sources.

Reads each source tree with :mod:`ast` (SGLang is never imported, nothing is installed)
and writes, per release, into ``tests/adapters/data/sglang_signatures.json``: the
parameters of the v1 ``EAGLEWorker``'s five hand-over methods
(``sglang/srt/speculative/eagle_worker.py``; ``null`` in a release without that worker)
and of the overlap ``EAGLEWorkerV2``'s same-named methods
(``eagle_worker_v2.py``), which the installer refuses. Parameter lists are names in
order, without ``self``; ``*args``/``**kwargs`` keep their stars and keyword-only
parameters are listed after a ``*``. Entries for other releases already in the file are
kept. Get the sources as ``tools/record_corpus/sglang.py`` says (0.5.23 is a wheel:
unzip it), then, from the repository root::

    python tools/record_corpus/sglang_signatures.py 0.5.10.post1=SRC/sglang-0.5.10.post1 \\
        0.5.23=SRC/sglang-0.5.23
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "adapters" / "data" / "sglang_signatures.json"
METHODS = ("forward_batch_generation", "forward_draft_extend", "draft", "verify",
           "forward_draft_extend_after_decode")
WORKERS = {"EAGLEWorker": "sglang/srt/speculative/eagle_worker.py",
           "EAGLEWorkerV2": "sglang/srt/speculative/eagle_worker_v2.py"}
ABOUT = ("Parameter names (in order, without self; '*' before keyword-only ones; null: "
         "the release has no such class or method) of the SGLang worker methods "
         "specguard's SGLang installer wraps, per release, read from the release's "
         "source with ast by tools/record_corpus/sglang_signatures.py.")


def parameters(function: ast.FunctionDef) -> list[str]:
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args)][1:]
    if args.vararg is not None:
        names.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        names.append("*")
    names += [a.arg for a in args.kwonlyargs]
    if args.kwarg is not None:
        names.append(f"**{args.kwarg.arg}")
    return names


def methods_of(source: Path, cls_name: str) -> dict[str, list[str] | None] | None:
    if not source.exists():
        return None
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            found = {item.name: parameters(item) for item in node.body
                     if isinstance(item, ast.FunctionDef)}
            return {name: found.get(name) for name in METHODS}
    return None


def read(root: Path) -> dict[str, Any]:
    base = root / "python" if (root / "python" / "sglang").is_dir() else root
    return {cls: methods_of(base / path, cls) for cls, path in WORKERS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", help="RELEASE=PATH of an unpacked source")
    parser.add_argument("--print", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    data: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}
    releases = data.get("releases", {})
    for given in args.sources:
        release, _, path = given.partition("=")
        releases[release] = read(Path(path))
    document = {"about": ABOUT, "releases": dict(sorted(releases.items()))}
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    if args.print:
        sys.stdout.write(text)
    else:
        OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
