"""The contract's tables (contracts/envelope.json, lifecycles.json, capabilities.json): each valid by its schema,
consistent within itself, and what both the reference core and the judges read."""

from __future__ import annotations

import copy
import json
import re

import pytest

from harness.contract_tables import TABLES, document_validator, schema_of, table
from harness.evidence.stages import LIFECYCLE_TABLES, Stage
from harness.resources import contract_file


def problems(name: str, document: object) -> list[str]:
    return [error.message for error in document_validator(schema_of(name)).iter_errors(document)]


@pytest.mark.parametrize("name", TABLES)
def test_every_table_is_valid_by_its_schema(name):
    assert problems(name, table(name)) == []


@pytest.mark.parametrize("name, spoil", [
    ("envelope.json", lambda d: d["forms"]["peer"]["headers"][1].update(when={"kind": "memo"})),
    ("envelope.json", lambda d: d["message_types"].pop("notice")),
    ("lifecycles.json", lambda d: d["lifecycles"]["task"]["transitions"].append(["pending", "reply"])),
    ("capabilities.json", lambda d: d["kinds"]["codex"]["features"]["inject"].update(evidence=[])),
])
def test_a_spoiled_table_is_refused_by_its_schema(name, spoil):
    document = copy.deepcopy(json.loads(contract_file(name).read_text(encoding="utf-8")))
    spoil(document)
    assert problems(name, document) != []


def test_every_template_names_declared_fields_and_every_type_matches_its_pattern():
    grammar = table("envelope.json")
    for form in grammar["forms"].values():
        for header in form["headers"]:
            assert set(re.findall(r"\{([a-z_]+)\}", header["value"])) <= set(grammar["fields"]), header
            assert {header.get("when", {}).get("field")} - {None} <= set(grammar["fields"]), header
    for message_type in grammar["message_types"].values():
        assert re.fullmatch(grammar["fields"]["message_type"], message_type)


def test_every_lifecycle_speaks_the_tables_vocabulary():
    data = table("lifecycles.json")
    assert set(data["lifecycles"]) == {*data["kinds"], "binding"}
    for name, lifecycle in data["lifecycles"].items():
        events = {event for _, event, _ in lifecycle["transitions"]}
        assert events <= set(data["events"]), name
        assert set(lifecycle["stages"]) == events, f"{name}: every event records one stage, and only its events"
        assert set(lifecycle["stages"].values()) <= set(data["stages"]), name
        states = {lifecycle["initial"]} | {s for src, _, dst in lifecycle["transitions"] for s in (src, dst)}
        assert set(lifecycle["terminal"]) <= states, name


def test_the_export_schema_lists_the_tables_kinds_and_stages():
    defs = json.loads(contract_file("export.schema.json").read_text(encoding="utf-8"))["$defs"]
    data = table("lifecycles.json")
    assert defs["kind"]["enum"] == data["kinds"]
    assert defs["stage"]["enum"] == list(data["stages"]) == [stage.value for stage in Stage]


def test_the_export_schema_admits_each_kinds_states_and_the_bindings():
    schema = json.loads(contract_file("export.schema.json").read_text(encoding="utf-8"))
    per_kind = {rule["if"]["properties"]["kind"]["const"]: rule["then"]["properties"]["state"]["enum"]
                for rule in schema["$defs"]["record"]["allOf"]}
    for name, lifecycle in LIFECYCLE_TABLES.items():
        states = {lifecycle.initial} | {s for (src, _), dst in lifecycle.transitions.items() for s in (src, dst)}
        listed = per_kind.get(name) or schema["$defs"]["binding"]["properties"]["state"]["enum"]
        assert set(listed) == states, f"{name}: the export admits {sorted(listed)}, the table has {sorted(states)}"


def test_the_core_and_the_judges_read_the_same_tables():
    from peerwire import lifecycle
    from peerwire.contract_data import table as core_table

    for name in TABLES:
        assert core_table(name) == table(name)
    assert [stage.value for stage in lifecycle.Stage] == [stage.value for stage in Stage]
    core = {**{kind.value: t for kind, t in lifecycle.LIFECYCLES.items()}, "binding": lifecycle.BINDING}
    for name, judged in LIFECYCLE_TABLES.items():
        assert {(src, str(event)): dst for (src, event), dst in core[name].transitions.items()} == judged.transitions
