"""The ``specguard`` command: run the reference engine, list rules and faults, check snapshots."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from specguard import __version__

__all__ = ["main"]

# subcommand → (module, help); each module offers add_arguments(parser) and run(args) -> int.
_COMMANDS = {
    "run": ("specguard.runner.main_job",
            "run a synthetic workload through the reference MTP engine"),
    "rules": ("specguard.runner._cmd_rules", "print the rule catalogue"),
    "faults": ("specguard.runner.faults", "list the fault catalogue"),
    "check": ("specguard.adapters.snapshots",
              "re-validate a violation snapshot and print the report"),
    "bench": ("specguard.benchmarks.cli", "measure validation cost against the numpy floor"),
    "docs": ("specguard.runner._cmd_docs", "build (or serve) the docs site"),
}


# What the reference engine needs beyond the core (`pip install 'specguard[engine]'`).
_ENGINE_EXTRA = ("torch", "tqdm")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specguard", description=__doc__)
    parser.add_argument("--version", action="version", version=f"specguard {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in _COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module=module_name)
        module = _load(module_name)
        if module is not None:
            module.add_arguments(sub)
    return parser


def _load(module_name: str):  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name in _ENGINE_EXTRA:
            return None
        if error.name != module_name:
            raise
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = _parser().parse_args(argv)
    module = _load(args.module)
    if module is None:
        print(f"specguard {args.command}: needs the reference engine; install it with "
              "pip install 'specguard[engine]'", file=sys.stderr)
        return 2
    return int(module.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
