"""``specguard docs``: build the docs site strictly, or serve it with live reload.

The site is generated from the contracts when it is built, so it lives next to the
sources: the command looks for ``mkdocs.yml`` in the current directory and its parents,
then next to the installed package (an editable install from a checkout).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

__all__ = ["HELP", "add_arguments", "find_config", "mkdocs_command", "run"]

HELP = "build (or serve) the docs site"

_CONFIG = "mkdocs.yml"


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
    return subprocess.call(mkdocs_command(args, config), cwd=config.parent)
