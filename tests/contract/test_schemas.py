"""The contract's schemas as the suite reads them: the output union, comparison by admitted values, limits."""

from __future__ import annotations

import copy

import pytest
from jsonschema import Draft202012Validator

from harness.contract.schemas import (
    PROFILE_TOOLS,
    ContractShapeError,
    body_byte_limit,
    canonical_schema,
    first_difference,
    result_alternative,
    schema_differences,
    tool_contract,
)
from peerwire import contract as served
from peerwire import limits

PAIRS = [(profile, tool) for profile, (_, tools) in PROFILE_TOOLS.items() for tool in tools]
ERROR = {"error": {"code": "unknown_target", "message": "no agent is named x"}}


@pytest.mark.parametrize("profile, tool", PAIRS, ids=[f"{p}-{t}" for p, t in PAIRS])
def test_every_output_schema_admits_the_result_and_the_error_and_nothing_between(profile, tool):
    contract = tool_contract(tool, profile)
    union = Draft202012Validator(contract.output_schema)
    assert contract.output_schema["type"] == "object", "MCP wants an object schema at the root"
    assert union.is_valid(ERROR), "strict clients validate tool errors against the outputSchema too"
    assert contract.result_violations(ERROR), "an error is not a result"
    assert not union.is_valid({"error": {"code": "no_such_code", "message": "x"}})
    assert not union.is_valid({**ERROR, "extra": 1})


def test_an_output_schema_of_another_form_is_refused():
    schema = copy.deepcopy(tool_contract("send_message").output_schema)
    with pytest.raises(ContractShapeError):
        result_alternative({**schema, "oneOf": schema["oneOf"][:1]})
    with pytest.raises(ContractShapeError):
        result_alternative({"$ref": "#/$defs/information_receipt", "$defs": schema["$defs"]})


def test_the_reference_advertises_the_contract():
    for profile in PROFILE_TOOLS:
        advertised = {t["name"]: t for t in served.tools(profile)}
        assert schema_differences(advertised, profile) == []


def test_schemas_compare_by_the_values_they_admit():
    schema = tool_contract("send_message").output_schema
    success = result_alternative(schema)
    inlined = {**schema["$defs"]["information_receipt"], "$defs": schema["$defs"]}
    reworded = copy.deepcopy(schema)
    reworded["description"] = "other words"
    reworded["oneOf"] = list(reversed(reworded["oneOf"]))
    reworded["$defs"]["information_receipt"]["required"].reverse()
    assert canonical_schema(success) == canonical_schema(inlined), "a top-level $ref inlined is the same schema"
    assert first_difference(canonical_schema(schema), canonical_schema(reworded)) is None
    narrowed = copy.deepcopy(schema)
    narrowed["$defs"]["error"]["properties"]["code"]["enum"].remove("unknown_target")
    assert "enum" in first_difference(canonical_schema(schema), canonical_schema(narrowed))
    assert "expected 2 items, found 1" in first_difference(canonical_schema(schema),
                                                          canonical_schema({**schema, "oneOf": schema["oneOf"][:1]}))


def test_the_suites_reading_of_the_schemas_is_the_cores():
    """The suite derives bounds from the schemas (tests/core/test_limits.py ties the core to them)."""
    receive = tool_contract("receive_messages").input_schema
    assert body_byte_limit() == limits.MAX_BODY_BYTES
    assert receive["properties"]["limit"]["default"] == limits.DEFAULT_RECEIVE_LIMIT
    assert tool_contract("list_agents").input_schema["properties"]["name_prefix"]["maxLength"] == limits.MAX_NAME_CHARS
