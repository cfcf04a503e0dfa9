"""The evidence stages and lifecycle tables the judges read, from ``contracts/lifecycles.json``.

:class:`Stage` has a member for every stage the contract lists (``Stage.PROVIDER_VISIBLE``
is ``"provider_visible"``), so a judge that names a stage the contract no longer has
fails on import, not by finding nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from harness.contract_tables import LIFECYCLES, table

Stage = StrEnum("Stage", {name.upper(): name for name in table(LIFECYCLES)["stages"]})  # type: ignore[misc]
"""Every stage an evidence row can record."""


@dataclass(frozen=True)
class Table:
    """One lifecycle of the contract: transitions ``(state, event) -> state`` and the stage each event records."""

    name: str
    initial: str
    transitions: Mapping[tuple[str, str], str]
    stages: Mapping[str, str]

    def stages_into(self, state: str) -> frozenset[str]:
        """The stages of the events that lead into ``state`` (what evidence says it was reached)."""
        return frozenset(self.stages[event] for (_src, event), dst in self.transitions.items() if dst == state)


def _table(name: str, data: Mapping[str, Any]) -> Table:
    return Table(name, data["initial"], {(src, event): dst for src, event, dst in data["transitions"]},
                 dict(data["stages"]))


LIFECYCLE_TABLES: Mapping[str, Table] = {name: _table(name, data)
                                         for name, data in table(LIFECYCLES)["lifecycles"].items()}
"""Each record kind's lifecycle, and ``binding``'s."""
BINDING = LIFECYCLE_TABLES["binding"]
