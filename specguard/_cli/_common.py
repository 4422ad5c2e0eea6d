"""What the subcommands share: the command's exit statuses and the options' value types.

Every exit status of ``specguard`` is defined here, once: those every command can end
with (bad options, Ctrl-C, a closed pipe) and those of ``specguard run``'s main job.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_CRASH", "EXIT_DIVERGED", "EXIT_INTERRUPTED", "EXIT_OK",
           "EXIT_USAGE", "EXIT_VIOLATION", "at_least"]

EXIT_OK = 0
#: ``specguard run``: the tokens differ from plain greedy decoding.
EXIT_DIVERGED = 1
#: Bad options or settings (argparse exits with it too).
EXIT_USAGE = 2
#: ``specguard run``: a contract violation stopped the run.
EXIT_VIOLATION = 3
#: ``specguard run``: the engine crashed or stalled.
EXIT_CRASH = 4
#: 128 + SIGINT, as a shell reports a command stopped by Ctrl-C.
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE, as a shell reports a command whose reader went away.
EXIT_BROKEN_PIPE = 141


def at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``[minimum, maximum]``, else a usage error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value
    return parse
