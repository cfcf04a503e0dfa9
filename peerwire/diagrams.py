"""The state diagrams of ``docs/lifecycles.md``, drawn from the tables themselves.

    python -m peerwire.diagrams > docs/lifecycles.md

Every lifecycle the core keeps as a table (:mod:`peerwire.lifecycle`: records,
bindings and a Codex owner) is drawn here, so the page cannot say what the code does not do; a test keeps the page
equal to what this prints.
"""

from __future__ import annotations

import sys

from .lifecycle import BINDING, LIFECYCLES, OWNER, Kind, StateTable

TABLES: tuple[tuple[StateTable, str], ...] = (
    (LIFECYCLES[Kind.TASK], "A task, from admission to its one reply."),
    (LIFECYCLES[Kind.INFORMATION], "An information record: never runnable work, only made visible."),
    (LIFECYCLES[Kind.REPLY], "A reply, explicit or made of a turn's outcome: published as admitted, then shown."),
    (LIFECYCLES[Kind.NOTICE], "A notice from peerwire itself (an uncertain delivery, an interrupted turn)."),
    (BINDING, "A provider binding: one task admitted into one exact provider turn."),
    (OWNER, "A Codex owner (one app-server per agent and generation): its thread's turns."),
)


def document() -> str:
    """The whole page, in Markdown with one Mermaid diagram per table."""
    out = ["# Lifecycles", "",
           "Generated from the tables by `python -m peerwire.diagrams`; do not edit by hand. An event a table does",
           "not allow in a state raises `illegal_transition` and changes nothing.", ""]
    for table, about in TABLES:
        out += [f"## {table.name}", "", about, "", "```mermaid", table.mermaid(), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(document())
