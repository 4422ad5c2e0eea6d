"""The subcommands of ``specguard``, one module each.

Every module offers ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status). Building the parser imports only what the
options need: the reference engine (torch) and the benchmarks load inside ``run`` of the
commands that use them, so ``specguard --help``, ``rules``, ``faults``, ``check`` and
``docs`` never import torch. ``_common`` holds what they share: every exit status of
the command, defined once, and the options' value types.
"""
