"""JSON Schema of every boundary object: its fields, named shapes, dtypes and docs."""

from __future__ import annotations

import json

import pytest
from contract_builders import build

from specguard import contracts

_OBJECTS = pytest.mark.parametrize("cls", contracts.BOUNDARY_OBJECTS, ids=lambda c: c.__name__)


@_OBJECTS
def test_schema_has_every_field(cls):
    """The schema's properties are exactly the object's fields; optional ones not required."""
    schema = contracts.json_schema(cls)
    fields = contracts.fields_of(cls)
    assert set(schema["properties"]) == {f.name for f in fields}
    assert set(schema["required"]) == {f.name for f in fields if not f.optional}
    assert schema["title"] == cls.__name__
    assert schema["additionalProperties"] is False


@_OBJECTS
def test_array_fields_carry_named_shapes_and_dtypes(cls):
    """Each array field lists its axes by dimension name and its allowed dtypes."""
    properties = contracts.json_schema(cls)["properties"]
    for spec in contracts.fields_of(cls):
        if isinstance(spec, contracts.ArrayField):
            assert properties[spec.name]["x-shape"] == [str(a) for a in spec.axes]
            assert properties[spec.name]["x-dtype"] == sorted(spec.dtypes)


@_OBJECTS
def test_descriptions_come_from_field_docstrings(cls):
    """Every field is documented, and the schema's description is that docstring."""
    docs = contracts.field_docs(cls)
    properties = contracts.json_schema(cls)["properties"]
    for spec in contracts.fields_of(cls):
        assert docs[spec.name]
        assert properties[spec.name]["description"] == docs[spec.name]


def test_shapes_name_the_shared_dimensions():
    """The named dims readers rely on appear as declared, offsets included."""
    batch = contracts.json_schema(contracts.ScheduledBatch)["properties"]
    verify = contracts.json_schema(contracts.VerifyOutput)["properties"]
    drafter = contracts.json_schema(contracts.DrafterInput)["properties"]
    assert batch["draft_token_ids"]["x-shape"] == ["num_decode", "mtp_k"]
    assert batch["block_tables"]["x-shape"] == ["num_seqs", "max_blocks"]
    assert verify["token_ids"]["x-shape"] == ["num_decode", "mtp_k+1"]
    assert drafter["query_start_loc"]["x-shape"] == ["num_seqs+1"]


def test_bool_fields_are_boolean_arrays():
    """is_decode is an array of booleans with dtype bool, not integers."""
    is_decode = contracts.json_schema(contracts.ScheduledBatch)["properties"]["is_decode"]
    assert is_decode["items"] == {"type": "boolean"}
    assert is_decode["x-dtype"] == ["bool"]


def test_scalars_carry_their_minimums():
    """Scalar ranges (SG006) appear as JSON Schema minimums."""
    properties = contracts.json_schema(contracts.ScheduledBatch)["properties"]
    assert properties["mtp_k"]["minimum"] == 1
    assert properties["num_decode"]["minimum"] == 0


@_OBJECTS
def test_clean_object_as_lists_validates_against_its_schema_model(cls):
    """A clean object, arrays turned into lists, is accepted by the schema's model."""
    obj = build(cls)
    data = {spec.name: getattr(obj, spec.name) for spec in contracts.fields_of(cls)}
    data = {k: v.tolist() if hasattr(v, "tolist") else v for k, v in data.items()}
    model = contracts.schema_model(cls).model_validate(data)
    assert json.loads(model.model_dump_json()) == data
