"""``python -m specguard``: the same command as the ``specguard`` console script."""

from specguard.cli import main

raise SystemExit(main())
