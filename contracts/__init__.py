"""specguard contracts: the typed boundary objects of a speculative-decoding step.

Pure: knows no engine, imports numpy always and torch only when a tensor shows up.
Build an object and it is validated under the current mode::

    from specguard import contracts as sg
    drafts = sg.DraftTokens.from_mapping(decode_ids, engine_drafts, mtp_k=3, vocab_size=V,
                                         placeholder=last_tokens)
    batch = sg.ScheduledBatch(..., draft_token_ids=drafts.draft_token_ids, ...)

A broken rule raises :class:`ContractViolation` naming the rule, the seq and its batch
position (strict), is logged (warn), or is not looked for at all (off); either way every
listener (:func:`listening`) is told first.
"""

from specguard.contracts._boundaries import (  # noqa: F401  (register rules, clearances)
    _batch_clearance,
    _output_clearance,
    _seq_ids,
    _stream_clearance,
    _structure,
)
from specguard.contracts._boundaries._types import Array as Array
from specguard.contracts._boundaries._types import Bool as Bool
from specguard.contracts._boundaries._types import Index as Index
from specguard.contracts._boundaries.draft_tokens import DraftTokens as DraftTokens
from specguard.contracts._boundaries.drafter_output import DrafterOutput as DrafterOutput
from specguard.contracts._boundaries.embedding_inputs import DrafterInput as DrafterInput
from specguard.contracts._boundaries.embedding_inputs import ModelInput as ModelInput
from specguard.contracts._boundaries.logits_rows import LogitsRows as LogitsRows
from specguard.contracts._boundaries.request_output import RequestOutput as RequestOutput
from specguard.contracts._boundaries.scheduled_batch import ScheduledBatch as ScheduledBatch
from specguard.contracts._boundaries.tokens_across_ranks import (
    TokensAcrossRanks as TokensAcrossRanks,
)
from specguard.contracts._boundaries.verify_output import PLACEHOLDER as PLACEHOLDER
from specguard.contracts._boundaries.verify_output import VerifyOutput as VerifyOutput
from specguard.contracts._core._arrays import describe as describe
from specguard.contracts._core._config import Collect as Collect
from specguard.contracts._core._config import Config as Config
from specguard.contracts._core._config import Depth as Depth
from specguard.contracts._core._config import DeviceValues as DeviceValues
from specguard.contracts._core._config import Mode as Mode
from specguard.contracts._core._config import checking as checking
from specguard.contracts._core._config import configure as configure
from specguard.contracts._core._config import current as current_config
from specguard.contracts._core._config import restore as restore_config
from specguard.contracts._core._contract import BoundaryObject as BoundaryObject
from specguard.contracts._core._contract import boundary_classes as boundary_classes
from specguard.contracts._core._contract import boundary_object as boundary_object
from specguard.contracts._core._contract import compile_checks as compile_checks
from specguard.contracts._core._deferred import flush_deferred as flush_deferred
from specguard.contracts._core._deferred import pending_count as pending_deferred
from specguard.contracts._core._delivery import Delivery as Delivery
from specguard.contracts._core._delivery import DeliveryContext as DeliveryContext
from specguard.contracts._core._delivery import listen as listen
from specguard.contracts._core._delivery import listening as listening
from specguard.contracts._core._delivery import report as report
from specguard.contracts._core._dims import DIMENSIONS as DIMENSIONS
from specguard.contracts._core._dims import Dim as Dim
from specguard.contracts._core._docs import field_docs as field_docs
from specguard.contracts._core._errors import ConfigError as ConfigError
from specguard.contracts._core._errors import ContractViolation as ContractViolation
from specguard.contracts._core._errors import DeferredViolation as DeferredViolation
from specguard.contracts._core._errors import SpecguardError as SpecguardError
from specguard.contracts._core._fields import ArrayField as ArrayField
from specguard.contracts._core._fields import ScalarField as ScalarField
from specguard.contracts._core._format import format_report as format_report
from specguard.contracts._core._registry import REGISTRY as REGISTRY
from specguard.contracts._core._registry import Boundary as Boundary
from specguard.contracts._core._registry import Rule as Rule
from specguard.contracts._core._registry import rule as rule
from specguard.contracts._core._registry import structural_rule as structural_rule
from specguard.contracts._core._schema import json_schema as json_schema
from specguard.contracts._core._schema import schema_model as schema_model
from specguard.contracts._core._stats import STATS as STATS
from specguard.contracts._core._validate import validate as validate
from specguard.contracts._core._values import ValueChecks as ValueChecks
from specguard.contracts._core._violation import Finding as Finding
from specguard.contracts._core._violation import Violation as Violation
from specguard.contracts._core._warn import warn as warn

#: Every boundary object of the contracts, in the order a step crosses them: read from
#: the class registry (:func:`boundary_classes`), so a new one is listed where it is
#: declared.
BOUNDARY_OBJECTS: tuple[type[BoundaryObject], ...] = tuple(sorted(
    (cls for cls in boundary_classes().values()
     if cls.__module__.startswith("specguard.contracts._boundaries.")),
    key=lambda cls: list(Boundary).index(Boundary(cls.__sg_boundary__))))


def fields_of(cls: type[BoundaryObject]) -> tuple[ArrayField | ScalarField, ...]:
    """The compiled field specs of a boundary class, in validation order."""
    return cls.__sg_plan__.fields


__all__ = [
    "BOUNDARY_OBJECTS",
    "DIMENSIONS",
    "PLACEHOLDER",
    "REGISTRY",
    "STATS",
    "Array",
    "ArrayField",
    "Bool",
    "Boundary",
    "BoundaryObject",
    "Collect",
    "Config",
    "ConfigError",
    "ContractViolation",
    "DeferredViolation",
    "Delivery",
    "DeliveryContext",
    "Depth",
    "DeviceValues",
    "Dim",
    "DraftTokens",
    "DrafterInput",
    "DrafterOutput",
    "Finding",
    "Index",
    "LogitsRows",
    "Mode",
    "ModelInput",
    "RequestOutput",
    "Rule",
    "ScalarField",
    "ScheduledBatch",
    "SpecguardError",
    "TokensAcrossRanks",
    "ValueChecks",
    "VerifyOutput",
    "Violation",
    "boundary_classes",
    "boundary_object",
    "checking",
    "compile_checks",
    "configure",
    "current_config",
    "describe",
    "field_docs",
    "fields_of",
    "flush_deferred",
    "format_report",
    "json_schema",
    "listen",
    "listening",
    "pending_deferred",
    "report",
    "restore_config",
    "rule",
    "schema_model",
    "structural_rule",
    "validate",
    "warn",
]
