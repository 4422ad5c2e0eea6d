"""JSON Schema of every boundary object, derived from its compiled field specs.

pydantic builds the schema: each array field becomes a nested list of integers (or
booleans) of the declared rank, annotated with its dtypes and its shape in named
dimensions, so the docs site and other languages read the same contract. pydantic is
imported here, at the first export, never by ``import specguard.contracts``: validation
does not need it, and it is a sizeable part of a cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specguard.contracts._core._fields import ArrayField, FieldSpec, ScalarField

if TYPE_CHECKING:
    import pydantic

__all__ = ["json_schema", "schema_model"]

_MODELS: dict[type, type[pydantic.BaseModel]] = {}


def _nested(element: Any, rank: int) -> Any:
    for _ in range(rank):
        element = list[element]
    return element


def _model_field(spec: FieldSpec, doc: str | None) -> tuple[Any, Any]:
    import pydantic

    if isinstance(spec, ScalarField):
        hint: Any = spec.type | None if spec.optional else spec.type
        if spec.optional:
            return hint, pydantic.Field(None, ge=spec.minimum, le=spec.maximum, description=doc)
        return hint, pydantic.Field(..., ge=spec.minimum, le=spec.maximum, description=doc)
    assert isinstance(spec, ArrayField)
    element = bool if spec.dtypes == frozenset({"bool"}) else int
    hint = _nested(element, len(spec.axes))
    extra: dict[str, Any] = {
        "x-dtype": sorted(spec.dtypes),
        "x-shape": [str(a) for a in spec.axes],
    }
    if spec.optional:
        return hint | None, pydantic.Field(None, description=doc, json_schema_extra=extra)
    return hint, pydantic.Field(..., description=doc, json_schema_extra=extra)


def schema_model(cls: type) -> type[pydantic.BaseModel]:
    """A pydantic model with the same fields as a boundary object (arrays as lists)."""
    if cls not in _MODELS:
        import pydantic

        from specguard.contracts._core._docs import field_docs

        docs = field_docs(cls)
        # create_model takes the fields as keywords beside its own (__doc__, __config__):
        # typed as Any, they match none of its named parameters.
        fields: dict[str, Any] = {
            s.name: _model_field(s, docs.get(s.name)) for s in cls.__sg_plan__.fields}  # type: ignore[attr-defined]
        model = pydantic.create_model(
            cls.__name__,
            __doc__=cls.__doc__,
            __config__=pydantic.ConfigDict(extra="forbid", strict=True),
            **fields,
        )
        _MODELS[cls] = model
    return _MODELS[cls]


def json_schema(cls: type) -> dict[str, Any]:
    """The JSON Schema of a boundary object, with dtypes and named shapes per field."""
    return schema_model(cls).model_json_schema()
