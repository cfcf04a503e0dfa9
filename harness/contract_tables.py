"""The contract's tables, as the judges read them: ``contracts/envelope.json`` (the envelope
grammar), ``contracts/lifecycles.json`` (lifecycles and evidence stages) and
``contracts/capabilities.json`` (agent kinds, providers, Codex delivery capabilities).

The reference core reads the same files (:mod:`peerwire.contract_data`); the harness
reads them here, apart from any code of the core, so its checks judge a core by
the contract and not by what the reference happens to render.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from harness.resources import contract_file

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

ENVELOPE = "envelope.json"
LIFECYCLES = "lifecycles.json"
CAPABILITIES = "capabilities.json"
TABLES = (ENVELOPE, LIFECYCLES, CAPABILITIES)
"""Every table of the contract; each has a schema beside it (``NAME.schema.json``)."""


@lru_cache(maxsize=None)
def table(name: str) -> dict[str, Any]:
    """The contract file ``name`` (one of :data:`TABLES`, or a schema such as ``export.schema.json``), parsed;
    read once per process."""
    return json.loads(contract_file(name).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def document_validator(schema: str) -> "Draft202012Validator":
    """A validator for the contract's schema file ``schema`` (e.g. ``export.schema.json``), whose references
    into ``definitions.json`` resolve to that file."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    shared = json.loads(contract_file("definitions.json").read_text(encoding="utf-8"))
    registry = Registry().with_resource(shared["$id"], Resource.from_contents(shared))
    return Draft202012Validator(json.loads(contract_file(schema).read_text(encoding="utf-8")), registry=registry)


def schema_of(name: str) -> str:
    """The file name of the schema that ``name`` is validated by."""
    return name.removesuffix(".json") + ".schema.json"
