"""The agent registry's rules: names, identities and target resolution.

Pure functions over :class:`AgentRow` values; the store supplies the rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .errors import Code, PeerwireError
from .limits import MAX_NAME_CHARS

BROADCAST_TARGETS = frozenset({"*", "all", "everyone", "@all", "@everyone"})
SYSTEM_SENDER = "peerwire"

# Whole-string patterns, used with fullmatch: with match or search, "$" also matches before a final newline.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._@+-]*")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass(frozen=True)
class AgentRow:
    agent_id: str
    identity_key: str
    name: str
    aliases: tuple[str, ...]
    provider: str
    provider_session_id: str | None
    node_id: str
    enabled: bool
    sendable: bool
    generation: int
    status: str
    source: str
    created_at: str
    updated_at: str
    last_error: str | None
    row_order: int
    path: str | None = None
    parent_agent_id: str | None = None

    @property
    def ref(self) -> dict[str, str]:
        """How records and receipts name this agent."""
        return {"agent_id": self.agent_id, "name": self.name}

    def public(self, caller_id: str | None = None) -> dict[str, Any]:
        return {
            "name": self.name,
            "agent_id": self.agent_id,
            "aliases": list(self.aliases),
            "provider": self.provider,
            "status": self.status,
            "sendable": self.sendable and self.enabled,
            "enabled": self.enabled,
            "generation": self.generation,
            "is_caller": self.agent_id == caller_id,
            **({"path": self.path} if self.path else {}),
        }


def validate_name(name: object, what: str = "name") -> str:
    """Check an agent name or alias; reserved broadcast words are refused."""
    if not isinstance(name, str) or not name:
        raise PeerwireError(Code.INVALID_ARGUMENT, f"{what} must be a non-empty string")
    if len(name) > MAX_NAME_CHARS:
        raise PeerwireError(Code.INVALID_ARGUMENT, f"{what} is longer than {MAX_NAME_CHARS} characters")
    if name.lower() in BROADCAST_TARGETS or name.lower() == SYSTEM_SENDER:
        raise PeerwireError(Code.INVALID_ARGUMENT, f"{what} {name!r} is reserved")
    if not _NAME.fullmatch(name):
        raise PeerwireError(
            Code.INVALID_ARGUMENT,
            f"{what} {name!r} must start with a letter or digit and use only letters, digits, space or ._@+- "
            "(control characters such as a newline are never part of a name)",
        )
    if _UUID.fullmatch(name):
        raise PeerwireError(Code.INVALID_ARGUMENT, f"{what} {name!r} looks like an agent_id; pick a name")
    return name


def is_broadcast(target: Any) -> bool:
    if isinstance(target, (list, tuple, set, dict)):
        return True
    return isinstance(target, str) and target.strip().lower() in BROADCAST_TARGETS


def _newest(rows: Iterable[AgentRow]) -> AgentRow:
    return max(rows, key=lambda r: r.row_order)


def _by_identity(rows: Sequence[AgentRow]) -> dict[str, list[AgentRow]]:
    groups: dict[str, list[AgentRow]] = {}
    for row in rows:
        groups.setdefault(row.identity_key, []).append(row)
    return groups


def resolve_target(rows: Sequence[AgentRow], target: Any, *, strict: bool = False) -> AgentRow:
    """Resolve ``target`` to exactly one enabled agent, a sendable one if there is one.

    Order: exact agent_id; exact name or alias among sendable agents; then, as a
    fallback, among agents that are enabled but not sendable (the caller can
    tell by the row's ``sendable``); a disabled agent is ``target_not_sendable``.
    ``strict`` refuses the fallback: only a sendable agent resolves, anything
    else is ``target_not_sendable``. The newest row wins only between rows of
    the same identity (a re-registration); two identities matching the same name
    in the tier that decides are ``ambiguous_target``. Broadcasts and lists are
    refused.
    """
    if is_broadcast(target):
        raise PeerwireError(
            Code.BROADCAST_NOT_SUPPORTED,
            "broadcast targets are not supported: name exactly one agent (see list_agents)",
            {"target": target if isinstance(target, str) else list(target)},
        )
    if not isinstance(target, str) or not target.strip():
        raise PeerwireError(Code.INVALID_ARGUMENT, "target must be a non-empty agent name, alias or agent_id")

    def usable(row: AgentRow) -> bool:
        return row.enabled and (row.sendable or not strict)

    for row in rows:
        if row.agent_id == target:
            if not usable(row):
                raise _not_sendable(row)
            return row

    matches = [r for r in rows if r.name == target or target in r.aliases]
    for tier in (
        [r for r in matches if r.enabled and r.sendable],
        [r for r in matches if r.enabled],
        matches,
    ):
        if not tier:
            continue
        groups = _by_identity(tier)
        if len(groups) > 1:
            candidates = sorted((_newest(g) for g in groups.values()), key=lambda r: r.row_order)
            raise PeerwireError(
                Code.AMBIGUOUS_TARGET,
                f"{target!r} names {len(candidates)} different agents; use one of their agent_ids",
                {"target": target, "candidates": [c.ref for c in candidates]},
            )
        chosen = _newest(next(iter(groups.values())))
        if not usable(chosen):
            raise _not_sendable(chosen)
        return chosen

    raise PeerwireError(
        Code.UNKNOWN_TARGET,
        f"no agent is named {target!r}; list_agents shows who can be reached",
        {"target": target},
    )


def _not_sendable(row: AgentRow) -> PeerwireError:
    why = "disabled" if not row.enabled else "not sendable"
    return PeerwireError(
        Code.TARGET_NOT_SENDABLE,
        f"agent {row.name!r} ({row.agent_id}) is {why}",
        {"target": row.ref, "enabled": row.enabled, "sendable": row.sendable},
    )
