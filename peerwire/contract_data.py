"""The contract's tables, read as data: the envelope grammar, the lifecycles, the capability table.

The core renders envelopes from ``contracts/envelope.json``, moves records along
``contracts/lifecycles.json`` and knows its providers from
``contracts/capabilities.json``. The acceptance checks read the same files
(:mod:`harness.contract_tables`) and judge from them, never from this package's code,
so a change to the core's rendering cannot move the judges with it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from .resources import contracts

ENVELOPE = "envelope.json"
LIFECYCLES = "lifecycles.json"
CAPABILITIES = "capabilities.json"


def providers() -> tuple[str, ...]:
    """Every provider an agent may be registered with (``manual``: no adapter; the others' adapters)."""
    return tuple(table(CAPABILITIES)["providers"])


@lru_cache(maxsize=None)
def table(name: str) -> dict[str, Any]:
    """The contract file ``name`` (e.g. :data:`ENVELOPE`, or ``export.schema.json``), parsed; read once per
    process."""
    return json.loads((contracts() / name).read_text(encoding="utf-8"))
