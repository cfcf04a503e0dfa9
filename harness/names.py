"""The names every floor of the harness agrees on: files of a Codex home, and where a model meets the core's tools.

Kept in one low module so that readers of evidence, the scripted model and the
report writer name the same things without depending on the code that
projects a Codex home (:mod:`harness.codex.home`).
"""

from __future__ import annotations

CONFIG_NAME = "config.toml"
"""A Codex home's settings; a projected one holds the agent's session credential, so it is never an artifact."""
AUTH_FILE = "auth.json"
"""The credential file of an authorized Codex home: copied into agent homes, never into artifacts."""

PEERWIRE_SERVER_NAME = "peerwire"
SERVER_NAMES = {"messaging": PEERWIRE_SERVER_NAME, "collab": "collaboration"}
"""The name each tool profile's MCP server is registered under: a model sees its tools in the namespace
``mcp__<name>``, so the collaboration tools appear where the native collaboration profile puts them."""


def tool_namespace(server_name: str) -> str:
    """The namespace in which a Codex model is offered the tools of the MCP server registered as ``server_name``."""
    return f"mcp__{server_name}"


MESSAGING_NAMESPACE = tool_namespace(PEERWIRE_SERVER_NAME)
"""Where a model finds the messaging tools (``mcp__peerwire``)."""
TOOL_NAMESPACES = tuple(tool_namespace(name) for name in SERVER_NAMES.values())
"""Every namespace in which a model may be offered the core's tools."""

AWAITING_CAPABILITIES = "awaiting capabilities"
"""The phase of a scenario run spent waiting for the capability probe's verdict before its owners attached: the
acceptance run's wait, not the scenario's own cost, so a shard plan leaves it out of the run's duration."""
