"""Evidence the harness reads after a run: Codex rollouts and their binding to core records."""

from .binding import EvidenceBinding, bind_records
from .rollouts import UNVERIFIED, Location, Message, Occurrence, RolloutIndex, RolloutLine, ToolCall, Turn

__all__ = [
    "UNVERIFIED",
    "EvidenceBinding",
    "Location",
    "Message",
    "Occurrence",
    "RolloutIndex",
    "RolloutLine",
    "ToolCall",
    "Turn",
    "bind_records",
]
