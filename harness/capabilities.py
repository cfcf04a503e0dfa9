"""Capabilities, in one place: what each kind of agent can do, and what Codex delivery needs.

Both are ``contracts/capabilities.json``; this module is how the harness reads it.

* The **kinds' table**: one row per agent kind (the pinned release of each), one
  cell per delivery feature (:data:`FEATURES`) and per trace the checks read
  (:data:`TRACES`). A cell says whether the kind has it, how (the native path) or
  what happens instead (the declared limit), and the tests or recorded fixtures
  that prove it. Kinds are named as the runner's ``--agents`` names them:
  ``codex``, ``opencode``, or ``acp:NAME`` for any other ACP agent the user runs,
  which gets the generic ACP row (:func:`agent_kind`). A check that reads a trace
  an agent's kind lacks is skipped for that agent, naming it; never passed.
* **Providers**: every provider an agent may be registered with (the core reads the
  same list).
* **Codex delivery capabilities** (:data:`Capability`): what the capability probe
  (:mod:`harness.codex.capability_probe`) establishes per Codex installation, what a
  scenario may require (``needs``), and what the gate (:mod:`harness.acceptance.gate`)
  hands to runs. Their declarations (the protocol facts each needs, and the first
  release with them) are evaluated by the adapter's :mod:`peerwire.codex.capabilities`.

The reports render the table from its rows (:mod:`harness.report.capability_table`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from harness.contract_tables import CAPABILITIES, table

_TABLE = table(CAPABILITIES)
FEATURES: tuple[str, ...] = tuple(_TABLE["features"])
"""Delivery features, in the table's column order: inject, steer, start, interrupt, exact_completion,
native_reply."""
TRACES: tuple[str, ...] = tuple(_TABLE["traces"])
"""What the checks can read of an agent's work besides the core's records: rollout, call_meta, model_log."""
CAPABILITY_NAMES = (*FEATURES, *TRACES)
"""Every capability name a check or a scenario step may require of an agent's kind."""
PROVIDERS: tuple[str, ...] = tuple(_TABLE["providers"])
"""Every provider an agent may be registered with."""
ACP_PREFIX: str = _TABLE["acp_prefix"]

Capability = StrEnum("Capability", {d["capability"].upper(): d["capability"]  # type: ignore[misc]
                                    for d in _TABLE["codex"]["declarations"]})
"""Codex delivery capabilities (``Capability.STEER`` is ``"steer"``)."""


@dataclass(frozen=True)
class Cell:
    supported: bool
    how: str
    """The native path used, or (unsupported) what happens instead: the declared limit."""
    evidence: tuple[str, ...]
    """Tests (``tests/...py::name``) and fixtures (``fixtures/...``) that prove the cell."""


@dataclass(frozen=True)
class AgentKind:
    name: str
    provider: str
    """The provider adapter that drives it (``codex``, ``acp``)."""
    release: str
    """The pinned release the cells were established against."""
    cells: Mapping[str, Cell]
    """Its delivery features (:data:`FEATURES`)."""
    traces: Mapping[str, Cell]
    """Which of its traces the checks can read (:data:`TRACES`)."""

    def can(self, capability: str) -> bool:
        """Whether the kind has ``capability``: a feature or a trace name."""
        return self.cell(capability).supported

    def cell(self, capability: str) -> Cell:
        """The cell of ``capability`` (a feature or trace name); ``ValueError`` for another."""
        for cells in (self.cells, self.traces):
            if capability in cells:
                return cells[capability]
        raise ValueError(f"unknown capability {capability!r} (known: {', '.join(CAPABILITY_NAMES)})")

    def to_json(self) -> dict[str, object]:
        """The kind's row of the capability table, as a report carries it."""
        def cells(row: Mapping[str, Cell]) -> dict[str, object]:
            return {key: {"supported": cell.supported, "how": cell.how, "evidence": list(cell.evidence)}
                    for key, cell in row.items()}
        return {"kind": self.name, "provider": self.provider, "release": self.release,
                "features": cells(self.cells), "traces": cells(self.traces)}

    def limits(self) -> dict[str, str]:
        """Each unsupported feature and what happens instead."""
        return {feature: cell.how for feature, cell in self.cells.items() if not cell.supported}

    def row(self) -> dict[str, bool]:
        return {feature: self.cells[feature].supported for feature in FEATURES}


def _kind(name: str, row: Mapping[str, Any]) -> AgentKind:
    def cells(listed: Mapping[str, Any]) -> dict[str, Cell]:
        return {key: Cell(cell["supported"], cell["how"], tuple(cell["evidence"])) for key, cell in listed.items()}
    return AgentKind(name, row["provider"], row["release"], cells(row["features"]), cells(row["traces"]))


ANY_ACP = _kind(_TABLE["any_acp"], _TABLE["kinds"][_TABLE["any_acp"]])
"""The row of any other ACP agent: the ACP adapter's features (the protocol's limits are the adapter's), and
none of the traces an unknown agent may not leave."""
AGENT_KINDS: Mapping[str, AgentKind] = {name: _kind(name, row) for name, row in _TABLE["kinds"].items()
                                        if name != ANY_ACP.name}
"""The named kinds: agent kind -> its cells (README and reports show them from here)."""


def agent_kind(name: str) -> AgentKind:
    """The kind ``--agents`` names: ``codex``, ``opencode`` or ``acp:NAME`` (any ACP agent, :data:`ANY_ACP`'s
    row under its own name); ``KeyError`` for any other."""
    if name in AGENT_KINDS:
        return AGENT_KINDS[name]
    if name.startswith(ACP_PREFIX) and len(name) > len(ACP_PREFIX):
        return AgentKind(name, ANY_ACP.provider, ANY_ACP.release, ANY_ACP.cells, ANY_ACP.traces)
    raise KeyError(f"unknown agent kind {name!r} (known: {', '.join(AGENT_KINDS)}, or {ACP_PREFIX}NAME)")


def table_rows(kinds: Iterable[str] = ()) -> list[dict[str, object]]:
    """The capability table as JSON rows: every kind of :data:`AGENT_KINDS` and the generic ACP row, then any
    ``acp:NAME`` among ``kinds`` (the kinds a run used) under its own name."""
    names = [*AGENT_KINDS, ANY_ACP.name]
    names += [kind for kind in dict.fromkeys(kinds) if kind not in names]
    return [(ANY_ACP if name == ANY_ACP.name else agent_kind(name)).to_json() for name in names]


def kind_of_provider(provider: str) -> list[AgentKind]:
    """The agent kinds a provider adapter drives."""
    return [kind for kind in AGENT_KINDS.values() if kind.provider == provider]
