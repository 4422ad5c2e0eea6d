"""The ``specguard`` command: run the reference engine, list rules and faults, check snapshots.

It sits on top of every layer (contracts, adapters, runner, benchmarks); each subcommand
is one module of ``specguard._cli``. Whatever goes wrong reaches the terminal as one line
and an exit status, never as a traceback: a bad ``SPECGUARD_*`` value or bad options
exit 2, Ctrl-C exits 130 and a closed pipe (``specguard rules | head``) ends quietly.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from specguard import __version__
from specguard._cli._common import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED", "EXIT_USAGE", "main"]

# What the reference engine needs beyond the core (`pip install 'specguard[engine]'`).
_ENGINE_EXTRA = ("torch", "tqdm")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("specguard: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    problem = _settings_problem()
    if problem is not None:
        print(f"specguard: {problem}", file=sys.stderr)
        return EXIT_USAGE
    args = _parser().parse_args(argv)
    try:
        return int(args.command_module.run(args))
    except ModuleNotFoundError as error:
        if error.name not in _ENGINE_EXTRA:
            raise
        print(f"specguard {args.command}: needs the reference engine ({error.name} is "
              "missing); install it with pip install 'specguard[engine]'", file=sys.stderr)
        return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    from specguard._cli import bench, check, docs, faults, rules, run

    # The docstring is reST; a terminal shows plain text.
    summary = (__doc__ or "").partition("\n")[0].replace("``", "")
    parser = argparse.ArgumentParser(prog="specguard", description=summary)
    parser.add_argument("--version", action="version", version=f"specguard {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in (("run", run), ("rules", rules), ("faults", faults),
                         ("check", check), ("bench", bench), ("docs", docs)):
        sub = commands.add_parser(name, help=module.HELP, description=module.HELP,
                                  epilog=getattr(module, "EPILOG", None),
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.set_defaults(command_module=module)
        module.add_arguments(sub)
    return parser


def _settings_problem() -> str | None:
    """Why the ``SPECGUARD_*`` settings are unusable, or None.

    The contracts read them once, when first imported, and refuse a bad value with a
    ConfigError; it is caught here by name, since the class lives in the module whose
    import just failed.
    """
    try:
        import specguard.contracts  # noqa: F401
    except ValueError as error:
        if any(cls.__name__ == "ConfigError" for cls in type(error).__mro__):
            return str(error)
        raise
    from specguard.contracts import ConfigError

    if os.environ.get("SPECGUARD_VLLM_VERSION", "").strip():  # read as the vLLM plugin does
        from specguard.adapters.engines.vllm.release import release_from_environment

        try:
            release_from_environment()
        except ConfigError as error:
            return str(error)
    docs = os.environ.get("SPECGUARD_DOCS_URL", "").strip()
    if (docs and not docs.startswith(("https://", "http://"))) or any(c.isspace() for c in docs):
        return f"SPECGUARD_DOCS_URL must be an http(s) URL of the docs site; got {docs!r}"
    return None


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (tests)
        pass


if __name__ == "__main__":
    raise SystemExit(main())
