"""What Codex delivery needs from a Codex version, per capability: data and one evaluation.

Each :class:`Declaration` (data: ``contracts/capabilities.json``) names the protocol facts a capability needs (methods,
and fields inside their ``params``) and ``since``, the first Codex release
whose generated app-server schema (``codex app-server generate-json-schema``)
shows all of them. The releases were checked one by one; 0.58.0 is the first
release that generates a schema at all, so nothing older can be shown
eligible. A capability no release is known to offer has ``since = None``.

:func:`evaluate` judges a version, and optionally the set of facts its schema
offers, against the declarations. The adapter evaluates the version the
app-server reports at ``initialize`` and never attempts what the version
lacks; the harness adds the schema and a live probe (``harness.codex.capability_probe``)
before it enables delivery, because a version that qualifies on paper is not
evidence that delivery works.

Optional request fields (:data:`OPTIONAL_FIELDS`) are attribution metadata the
adapter adds to ``turn/start`` and ``turn/steer``; a version older than a
field's ``since`` is sent the request without it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .. import contract_data

__all__ = [
    "DECLARATIONS",
    "OPTIONAL_FIELDS",
    "Assessment",
    "Capability",
    "Declaration",
    "Fact",
    "OptionalField",
    "Verdict",
    "evaluate",
    "version_from_user_agent",
    "version_key",
]

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$")
# The initialize answer's userAgent: "<client name>/<version> (<platform>) ...".
_USER_AGENT_VERSION = re.compile(r"^[^/\s]+/(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)(?:\s|$)")


class Capability(StrEnum):
    IDLE_START = "idle_start"
    STEER = "steer"
    INJECT = "inject"
    INTERRUPT = "interrupt"
    RESUME = "resume"
    FORK = "fork"
    HISTORY_READ = "history_read"
    MCP_STARTUP_STATUS = "mcp_startup_status"
    STEER_CONTEXT = "steer_context"
    AGENT_MESSAGE = "agent_message"
    ENCRYPTED_CALL_ARGS = "encrypted_call_args"
    ATTACHED_TUI = "attached_tui"


@dataclass(frozen=True)
class Fact:
    """A method of the protocol, or a field of its ``params`` (a dotted path)."""

    method: str
    path: str | None = None

    def __str__(self) -> str:
        return self.method if self.path is None else f"{self.method} params.{self.path}"


@dataclass(frozen=True)
class Declaration:
    capability: Capability
    summary: str
    since: str | None
    needs: tuple[Fact, ...]
    requires: tuple[Capability, ...] = ()
    unknown: str = ""
    """For ``since = None``: what was checked and found missing, when no protocol fact can say it."""


@dataclass(frozen=True)
class OptionalField:
    method: str
    field: str
    since: str


def _declarations() -> dict[Capability, Declaration]:
    data = contract_data.table(contract_data.CAPABILITIES)["codex"]["declarations"]
    listed = [d["capability"] for d in data]
    if listed != [c.value for c in Capability]:
        raise ValueError(f"contracts/{contract_data.CAPABILITIES} declares {listed}, the adapter "
                         f"{[c.value for c in Capability]}")
    return {Capability(d["capability"]): Declaration(
        Capability(d["capability"]), d["summary"], d["since"], tuple(Fact(*need) for need in d["needs"]),
        tuple(Capability(r) for r in d.get("requires", ())), d.get("unknown", "")) for d in data}


# The declarations are contracts/capabilities.json (``codex``), where the harness's probe, gate and reports
# read them too. Two of them rest on more than schema facts: thread/inject_items takes raw Responses items
# (its schema types them only as `true`), so agent_message's 0.171.0 is the release whose generated
# ResponseItem union has the agent_message variant and where the live probe shows it reaching the model;
# attached_tui's listen endpoint and the TUI's --remote are command-line facts, checked on 0.171.0. Earlier
# releases were not checked, so none of them is claimed.
DECLARATIONS: Mapping[Capability, Declaration] = _declarations()

OPTIONAL_FIELDS: tuple[OptionalField, ...] = tuple(
    OptionalField(f["method"], f["field"], f["since"])
    for f in contract_data.table(contract_data.CAPABILITIES)["codex"]["optional_fields"])


def version_key(version: str) -> tuple:
    """A sort key for a Codex version: ``0.99.0 < 0.154.0-alpha.6 < 0.154.0 < 0.171.0``.

    Raises ValueError for anything that is not ``MAJOR.MINOR.PATCH[-PRERELEASE]``.
    """
    match = _VERSION.fullmatch(version)
    if match is None:
        raise ValueError(f"not a Codex version: {version!r}")
    major, minor, patch, pre = match.groups()
    # A pre-release sorts before its release; its parts compare numerically where they are numbers.
    tail = (1,) if pre is None else (0, *((0, int(p)) if p.isdigit() else (1, p) for p in pre.split(".")))
    return (int(major), int(minor), int(patch), tail)


def version_from_user_agent(user_agent: object) -> str | None:
    """The server version in an ``initialize`` answer's ``userAgent``, or None when it has none."""
    if not isinstance(user_agent, str):
        return None
    match = _USER_AGENT_VERSION.match(user_agent)
    return match.group(1) if match else None


@dataclass(frozen=True)
class Verdict:
    capability: Capability
    supported: bool
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"capability": self.capability.value, "supported": self.supported, "reason": self.reason}


@dataclass(frozen=True)
class Assessment:
    """The verdict on every declared capability for one Codex, and the optional fields it takes."""

    version: str | None
    verdicts: Mapping[Capability, Verdict]
    fields: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    @classmethod
    def unchecked(cls) -> Assessment:
        """For a Codex whose version is unknown: nothing is known to be missing, so nothing is refused."""
        reason = "the Codex version is unknown; not checked"
        return cls(None, {c: Verdict(c, True, reason) for c in Capability},
                   frozenset((f.method, f.field) for f in OPTIONAL_FIELDS))

    def allows(self, capability: Capability) -> bool:
        return self.verdicts[capability].supported

    def refusal(self, capability: Capability) -> str:
        """Why ``capability`` is not available, as a sentence for an ``unsupported`` error."""
        verdict = self.verdicts[capability]
        return f"Codex {self.version or '(unknown version)'} does not support {capability.value}: {verdict.reason}"

    def supported(self) -> list[Capability]:
        return [c for c, v in self.verdicts.items() if v.supported]

    def accepts_field(self, method: str, name: str) -> bool:
        """Whether an optional field of :data:`OPTIONAL_FIELDS` may be sent; other fields always may."""
        if not any(f.method == method and f.field == name for f in OPTIONAL_FIELDS):
            return True
        return (method, name) in self.fields

    def restricted_to(self, enabled: Iterable[str], why: str) -> Assessment:
        """The same assessment with every capability outside ``enabled`` unsupported for ``why``.

        Raises ValueError naming any entry of ``enabled`` that is not a capability.
        """
        names = set(enabled)
        unknown = sorted(names - {c.value for c in Capability})
        if unknown:
            raise ValueError(f"unknown capabilities {unknown} (known: {', '.join(c.value for c in Capability)})")
        verdicts = {c: v if c.value in names or not v.supported else Verdict(c, False, why)
                    for c, v in self.verdicts.items()}
        return Assessment(self.version, verdicts, self.fields)

    def to_json(self) -> dict[str, object]:
        return {"version": self.version,
                "capabilities": {c.value: v.to_json() for c, v in self.verdicts.items()},
                "optional_fields": sorted(f"{m} params.{n}" for m, n in self.fields)}


def evaluate(version: str, offered: Collection[Fact] | None = None) -> Assessment:
    """Judge Codex ``version`` (and, when given, the facts its schema ``offered``) against the declarations.

    A capability is supported when the version is at least its ``since``,
    ``offered`` (if given) holds every fact it needs, and every capability it
    requires is supported. A capability with ``since = None`` is never
    supported, even when the schema offers its facts: it has not been checked.
    Raises ValueError when ``version`` is not a version.
    """
    key = version_key(version)
    verdicts: dict[Capability, Verdict] = {}

    def judge(capability: Capability) -> Verdict:
        if capability in verdicts:
            return verdicts[capability]
        declaration = DECLARATIONS[capability]
        needs = ", ".join(map(str, declaration.needs))
        missing = [str(f) for f in declaration.needs if offered is not None and f not in offered]
        if missing:
            verdict = Verdict(capability, False, f"the app-server schema lacks {', '.join(missing)}")
        elif declaration.since is None:
            verdict = Verdict(capability, False, declaration.unknown or f"no Codex release is known to offer {needs}")
        elif key < version_key(declaration.since):
            verdict = Verdict(capability, False, f"needs Codex {declaration.since} or later ({needs})")
        else:
            verdict = Verdict(capability, True, f"since {declaration.since}: {needs}")
            for required in declaration.requires:
                if not judge(required).supported:
                    verdict = Verdict(capability, False, f"needs {required.value}, which is unsupported")
                    break
        verdicts[capability] = verdict
        return verdict

    for capability in Capability:
        judge(capability)
    fields = frozenset((f.method, f.field) for f in OPTIONAL_FIELDS
                       if key >= version_key(f.since)
                       and (offered is None or Fact(f.method, f.field) in offered))
    return Assessment(version, {c: verdicts[c] for c in Capability}, fields)


def declared_facts() -> set[Fact]:
    """Every fact a declaration or an optional field names: what a schema must be asked about."""
    facts = {f for d in DECLARATIONS.values() for f in d.needs}
    return facts | {Fact(f.method, f.field) for f in OPTIONAL_FIELDS}
