"""Votes: the evidence a test item leaves about the requirements it checks.

Every check a case or suite test makes becomes a :class:`Vote` for one
requirement: passed or failed, what was checked and, for a failure, the request
and the response that showed it. Votes travel with pytest's reports (as user
properties, so they cross pytest-xdist workers and land in the JUnit XML) and
the compliance report is computed from them alone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

VOTES_PROPERTY = "contract_votes"
ITEM_PROPERTY = "contract_item"
CLIP_CHARS = 2000


@dataclass(frozen=True)
class Vote:
    requirement: str
    passed: bool
    check: str
    item: str = ""
    case: str | None = None
    step: str | None = None
    detail: str | None = None
    request: Any = None
    response: Any = None
    exchange: Any = None
    """Every line sent and received around the failure, whatever its id (``[{"dir", "at_ms", "line"}]``)."""
    applicable: bool = True
    """False: the rule does not apply to this target (another negotiated revision); ``check`` says why."""
    blocked_by: tuple[str, ...] = ()
    """Not a verdict: the item stopped at the failure of these requirements before it could judge this one."""

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items()
               if v is not None and not (k == "applicable" and v) and not (k == "blocked_by" and not v)}
        if self.blocked_by:
            out["blocked_by"] = list(self.blocked_by)
        return clip(out)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Vote":
        return cls(**{**data, "blocked_by": tuple(data.get("blocked_by", ()))})


@dataclass(frozen=True)
class ItemInfo:
    """What a test item declares before it runs: its primary requirement and case."""

    item: str
    requirement: str
    case: str | None = None
    also: tuple[str, ...] = ()

    @property
    def requirements(self) -> tuple[str, ...]:
        return (self.requirement, *self.also)

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if v}


@dataclass
class VoteRecorder:
    """Collects one test item's votes, in order."""

    item: str
    case: str | None = None
    votes: list[Vote] = field(default_factory=list)

    def record(self, requirement: str, passed: bool, check: str, *, step: str | None = None,
               detail: str | None = None, request: Any = None, response: Any = None,
               exchange: Any = None) -> Vote:
        vote = Vote(requirement=requirement, passed=passed, check=check, item=self.item, case=self.case,
                    step=step, detail=detail, request=request, response=response, exchange=exchange)
        self.votes.append(vote)
        return vote

    def not_applicable(self, requirement: str, why: str) -> Vote:
        """Record that ``requirement`` does not apply to this target (say, under the revision it negotiated)."""
        vote = Vote(requirement=requirement, passed=True, check=f"not applicable: {why}", item=self.item,
                    case=self.case, applicable=False)
        self.votes.append(vote)
        return vote

    @property
    def failures(self) -> list[Vote]:
        return [v for v in self.votes if not v.passed]


def blocked_votes(info: ItemInfo, cast: Iterable[Vote]) -> list[Vote]:
    """Votes saying which of a failed item's requirements it never judged, and the failures that stopped it.

    An item that declares several requirements judges the later ones only if it
    gets that far; a requirement it never reached is not a pass and not a
    failure of its own, but blocked by the requirements that failed first.
    """
    cast = list(cast)
    failed = tuple(dict.fromkeys(v.requirement for v in cast if not v.passed))
    judged = {v.requirement for v in cast}
    if not failed:
        return []
    return [Vote(requirement=r, passed=False, item=info.item, case=info.case, blocked_by=failed,
                 check=f"not judged: the test stopped at the failure of {', '.join(failed)}")
            for r in info.requirements if r not in judged]


def encode_votes(votes: Iterable[Vote]) -> str:
    return json.dumps([v.to_json() for v in votes], ensure_ascii=False)


def decode_votes(text: str) -> list[Vote]:
    return [Vote.from_json(v) for v in json.loads(text)]


def clip(value: Any, limit: int = CLIP_CHARS) -> Any:
    """``value`` with every string longer than ``limit`` characters shortened and marked."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"…[{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {k: clip(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clip(v, limit) for v in value]
    return value


def failure_summary(failures: Iterable[Vote]) -> str:
    """Failed votes as text for a test failure: check, detail, request and response."""
    parts = []
    for vote in failures:
        where = f"{vote.case or vote.item}" + (f" > {vote.step}" if vote.step else "")
        parts.append(f"[{vote.requirement}] {where}: expected {vote.check}")
        if vote.detail:
            parts.append(f"  found: {vote.detail}")
        for label, value in (("request", vote.request), ("response", vote.response)):
            if value is not None:
                parts.append(f"  {label}: {json.dumps(clip(value, 500), ensure_ascii=False)}")
        if vote.exchange:
            parts.append("  exchange (every line, whatever its id):")
            parts += [f"    {line}" for line in exchange_lines(vote.exchange)]
    return "\n".join(parts)


def exchange_lines(exchange: Iterable[dict[str, Any]], limit: int = 40) -> list[str]:
    """An exchange as text, one line each: ``+12ms -> {...}`` for what was sent, ``<-`` for what came back."""
    entries = list(exchange)
    shown = entries[-limit:]
    out = [f"({len(entries) - len(shown)} earlier lines left out)"] if len(entries) > len(shown) else []
    for entry in shown:
        arrow = {"sent": "->", "received": "<-"}.get(entry.get("dir"), "--")
        server = f"server {entry['server']} " if "server" in entry else ""
        out.append(f"{server}+{entry.get('at_ms', 0):>6}ms {arrow} {clip(entry.get('line', ''), 300)}")
    return out
