"""The public APIs are curated: ``__all__`` is sorted, complete and deliberate."""

from __future__ import annotations

import types

import pytest

from specguard import adapters, contracts
from specguard.contracts import ops

CONTRACTS_API = (
    "BOUNDARY_OBJECTS", "DIMENSIONS", "PLACEHOLDER", "REGISTRY", "STATS", "Array", "ArrayField",
    "Bool", "Boundary", "BoundaryObject", "Collect", "Config", "ConfigError", "ContractViolation",
    "DeferredViolation", "Delivery", "DeliveryContext", "Depth", "DeviceValues", "Dim",
    "DraftTokens", "DrafterInput", "DrafterOutput", "Finding", "Index", "LogitsRows", "Mode",
    "ModelInput", "RequestOutput", "Rule", "ScalarField", "ScheduledBatch", "SpecguardError",
    "TokensAcrossRanks", "ValueChecks", "VerifyOutput",
    "Violation", "boundary_classes", "boundary_object", "checking", "compile_checks",
    "configure", "current_config", "describe",
    "field_docs", "fields_of", "flush_deferred", "format_report", "json_schema", "listen",
    "listening", "pending_deferred", "report", "restore_config", "rule", "schema_model",
    "structural_rule", "validate", "warn",
)

OPS_API = (
    "PLACEHOLDER", "UNSIGNED", "arange_like", "array_kind", "ceil_div", "clip_columns",
    "host_value", "is_host", "is_int", "number_text", "row_col", "row_entries",
    "unique_non_negative", "value_text",
    "within_columns",
)


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's __all__ order (RUF022): CONSTANTS, then Classes, then functions."""
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return group, name


def _public_names(module: types.ModuleType) -> set[str]:
    """Names a user can reach without an underscore, submodules aside."""
    return {
        name for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


@pytest.mark.parametrize("module", [contracts, adapters, ops], ids=lambda m: m.__name__)
def test_all_is_sorted_and_equals_the_public_names(module):
    """__all__ is sorted, has no duplicates and lists exactly the public names."""
    assert module.__all__ == sorted(module.__all__, key=_isort_key)
    assert len(set(module.__all__)) == len(module.__all__)
    assert set(module.__all__) == _public_names(module)


def test_contracts_api_is_locked():
    """Adding or removing a public name of contracts is a deliberate edit of this list."""
    assert tuple(contracts.__all__) == CONTRACTS_API


def test_rule_helper_api_is_locked():
    """The helpers rule authors build on are a deliberate list too."""
    assert tuple(ops.__all__) == OPS_API


def test_adapters_exports_guard():
    """The guard decorator is part of the adapters API."""
    assert "guard" in adapters.__all__
    assert callable(adapters.guard)


def test_exceptions_present_themselves_as_public():
    """Tracebacks show specguard.contracts.ContractViolation, not the private module."""
    for error in (contracts.SpecguardError, contracts.ContractViolation,
                  contracts.DeferredViolation, contracts.ConfigError):
        assert error.__module__ == "specguard.contracts"
    assert adapters.SnapshotError.__module__ == "specguard.adapters"


def test_example_modules_list_what_they_export():
    """The example catalogues' __all__ is sorted and every name in it exists."""
    from specguard.adapters import examples as adapter_examples
    from specguard.contracts import examples as contract_examples

    for module in (contract_examples, adapter_examples):
        assert module.__all__ == sorted(module.__all__, key=_isort_key)
        assert all(hasattr(module, name) for name in module.__all__)
    assert set(contract_examples.EXAMPLES) < set(adapter_examples.EXAMPLES)
