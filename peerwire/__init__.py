"""peerwire: the reference messaging core for agent-to-agent messaging over MCP."""

__version__ = "0.1.0"
