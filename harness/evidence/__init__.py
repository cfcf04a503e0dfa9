"""Evidence the harness reads after a run: the core's export, Codex rollouts, and the binding between them."""

from .binding import EvidenceBinding, bind_records
from .core import CoreEvidence, ExportError
from .layout import EXPORT_FILE
from .rollouts import UNVERIFIED, Location, Message, Occurrence, RolloutIndex, RolloutLine, ToolCall, Turn

__all__ = [
    "EXPORT_FILE",
    "UNVERIFIED",
    "CoreEvidence",
    "EvidenceBinding",
    "ExportError",
    "Location",
    "Message",
    "Occurrence",
    "RolloutIndex",
    "RolloutLine",
    "ToolCall",
    "Turn",
    "bind_records",
]
