"""``specguard docs``: build the docs site strictly, or serve it with live reload.

The site is generated from the contracts when it is built, so it lives next to the
sources: the command looks for ``mkdocs.yml`` in the current directory and its parents,
then next to the installed package (an editable install from a checkout).

mkdocs runs as a child process with the theme's start-up banner (coloured, whatever
``NO_COLOR`` says) turned off. A ``SIGTERM`` or ``SIGINT`` to ``specguard docs`` is handed
to that child, which is waited for (and killed if it lingers), so ``--serve`` never
leaves a server holding the port.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["HELP", "add_arguments", "find_config", "mkdocs_command", "mkdocs_environment", "run"]

HELP = "build (or serve) the docs site"

_CONFIG = "mkdocs.yml"
#: Seconds mkdocs has to exit after it is handed a signal, before it is killed.
STOP_GRACE_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard docs``."""
    parser.add_argument("--serve", action="store_true",
                        help="serve the site locally and rebuild it on every change")
    parser.add_argument("--site-dir", type=Path, default=None,
                        help="where to write the built site (default: site/ next to mkdocs.yml)")
    parser.add_argument("--dev-addr", default=None, metavar="HOST:PORT",
                        help="address to serve on with --serve (default 127.0.0.1:8000)")
    parser.add_argument("--config-file", type=Path, default=None,
                        help="the mkdocs.yml to use (default: found from the current directory)")


def find_config(start: Path) -> Path | None:
    """``mkdocs.yml`` in ``start`` or a parent, else next to the installed package."""
    for folder in (start, *start.parents):
        candidate = folder / _CONFIG
        if candidate.is_file():
            return candidate
    beside_package = Path(__file__).resolve().parents[2] / _CONFIG
    return beside_package if beside_package.is_file() else None


def mkdocs_command(args: argparse.Namespace, config: Path) -> list[str]:
    """The mkdocs command line for these options; always strict."""
    command = [sys.executable, "-m", "mkdocs", "serve" if args.serve else "build",
               "--strict", "--config-file", str(config)]
    if args.serve and args.dev_addr:
        command += ["--dev-addr", args.dev_addr]
    if not args.serve and args.site_dir is not None:
        command += ["--site-dir", str(args.site_dir.resolve())]
    return command


def mkdocs_environment() -> dict[str, str]:
    """The child's environment: ours, without mkdocs-material's start-up banner."""
    return {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


@contextlib.contextmanager
def _handed_on(child: subprocess.Popen[bytes]) -> Iterator[None]:
    """Signals that would end this process end the child first."""
    def forward(signum: int, frame: object) -> None:
        child.send_signal(signum)

    previous = {number: signal.signal(number, forward)
                for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _wait(child: subprocess.Popen[bytes]) -> int:
    with _handed_on(child):
        try:
            while True:
                try:
                    return child.wait()
                except KeyboardInterrupt:  # handed on already; wait for it to finish
                    continue
        finally:
            if child.poll() is None:
                try:
                    child.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()


def run(args: argparse.Namespace) -> int:
    """Build (or serve) the site; returns mkdocs' exit status, or 2 when it cannot start."""
    config = args.config_file or find_config(Path.cwd())
    if config is None or not config.is_file():
        print("specguard docs: no mkdocs.yml found; run it from a specguard checkout",
              file=sys.stderr)
        return 2
    if importlib.util.find_spec("mkdocs") is None:
        print('specguard docs: mkdocs is not installed; pip install "specguard[docs]"',
              file=sys.stderr)
        return 2
    # From the checkout root, so the hooks and the API reference import the sources there.
    child = subprocess.Popen(mkdocs_command(args, config), cwd=config.parent,
                             env=mkdocs_environment())
    code = _wait(child)
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention
