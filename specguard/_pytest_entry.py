"""pytest's entry point for specguard: the plugin, or one line saying why it cannot load.

pytest imports every installed plugin at the start of every run, so a bad
``SPECGUARD_*`` value, which stops the contracts' import, would otherwise break each run
in that environment with a traceback. Here it becomes a usage error: one line naming the
variable and its allowed values. The plugin itself is
:mod:`specguard.adapters.pytest_plugin`; its hooks and fixtures are re-exported here,
all of them, so pytest registers exactly what that module defines.
"""

from __future__ import annotations

import pytest

try:
    from specguard.adapters import pytest_plugin as _plugin
except ValueError as error:
    # The ConfigError class lives in the package whose import just failed: match by name.
    if not any(cls.__name__ == "ConfigError" for cls in type(error).__mro__):
        raise
    raise pytest.UsageError(f"specguard: {error}") from None

globals().update({name: getattr(_plugin, name) for name in dir(_plugin)
                  if name.startswith("pytest_") or name in _plugin.__all__})
