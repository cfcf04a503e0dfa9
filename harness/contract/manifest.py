"""The requirement manifest (``contracts/requirements.toml``) and run selection.

A requirement has a stable ID ``area:feature[:variant]``, a level (MUST, SHOULD,
MAY), its source, one sentence of behaviour and optionally a known divergence,
the reason it is deferred, or ``verified_by``: where the reference proves a
behaviour the black-box suite cannot observe (a provider turn, a live Codex
thread), in its own tests.

**Provenance.** The source says whose rule it is (:class:`Origin`): JSON-RPC
2.0's (``JSON-RPC 2.0 § 5 Response object``), an MCP revision's (``MCP
2025-11-25 § Basic / Lifecycle``), or the messaging contract's own (any other
source: ``contracts/SPEC.md#<anchor>``, a section of the contract's rules shipped
with it). A JSON-RPC or MCP requirement quotes
the spec's sentence (``quote``) with its keyword (``keyword``), and its level is
the keyword's: an MCP SHOULD is never a MUST here. ``revisions`` names the MCP
revisions whose text holds the rule (under another negotiated revision it does
not apply).

**Profiles.** ``protocol`` holds the tool-agnostic rules of JSON-RPC 2.0 and
MCP: it runs against any MCP stdio server, with no provisioner. ``messaging``
is the messaging contract (``contracts/tools``), ``collab`` the collaboration
profile (``contracts/collab``). A requirement's profile is its ``profile``
entry, else its area's: ``collab`` for ``collab``, ``messaging`` for the rest.
``needs`` names what a run must offer to test it (:data:`NEEDS`): consent to call
tools, a capability of the provisioner, or how its test is kept apart from
others (``fresh-server``, ``fresh-home``: :mod:`harness.contract.isolation`).

A :class:`Selection` picks the requirements a run is about: the profiles the
target offers, what the run offers of ``needs``, everything up to a level,
optionally narrowed to ID patterns.
"""

from __future__ import annotations

import enum
import json
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from jsonschema import Draft202012Validator

from peerwire import profiles

from .layout import MANIFEST_PATH, MANIFEST_SCHEMA_PATH


class ManifestError(ValueError):
    """The manifest does not load: TOML syntax or schema violations (all listed)."""


PROTOCOL = "protocol"
PROFILES: tuple[str, ...] = (PROTOCOL, *profiles.ALL)
"""Requirement profiles: ``protocol`` (JSON-RPC 2.0 and MCP, any server), then the tool profiles ``messaging``
(contract v1, ``contracts/tools``) and ``collab`` (``contracts/collab``)."""

FRESH_SERVER = "fresh-server"
FRESH_HOME = "fresh-home"
NEEDS: dict[str, str] = {
    "tool-calls": "consent to call the server's own tools (--call-tools or --tool-call; implied for a provisioned "
                  "messaging target)",
    "unavailable": "a provisioner that can make the implementation unavailable (capability `unavailable`)",
    "hang": "a provisioner that can hang the implementation, alive but silent (capability `hang`: freeze/thaw)",
    "agent-states": "a provisioner that can disable an agent or make it not sendable (capability `agent-states`: "
                    "set_agent)",
    FRESH_SERVER: "server processes of its own: its test changes or may end the session it talks to (an initialize "
                  "variant, stdin closed, hostile input, everything a session wrote since it started)",
    FRESH_HOME: "a home of its own: its test crashes the implementation, makes it unavailable or spoils its home",
}
"""What a requirement may need from a run beyond its profile, and how a run offers it."""
ISOLATION_NEEDS = (FRESH_SERVER, FRESH_HOME)
"""Needs every run meets, by starting what the test needs (:mod:`harness.contract.isolation`); the others are
offered by some runs only, and a requirement needing one a run lacks is not selected."""


def profile_of(requirement_id: str) -> str:
    """The profile a requirement's ID's area implies (a requirement's own ``profile`` entry overrides it)."""
    return "collab" if requirement_id.partition(":")[0] == "collab" else "messaging"


class Origin(enum.StrEnum):
    """Whose rule a requirement states."""

    JSON_RPC = "JSON-RPC 2.0"
    MCP = "MCP"
    CONTRACT = "messaging contract"

    @classmethod
    def of(cls, source: str) -> "Origin":
        if source.startswith("JSON-RPC 2.0 §"):
            return cls.JSON_RPC
        if source.startswith("MCP "):
            return cls.MCP
        return cls.CONTRACT


KEYWORD_LEVELS = {"MUST": "MUST", "MUST NOT": "MUST", "REQUIRED": "MUST", "SHALL": "MUST", "SHALL NOT": "MUST",
                  "SHOULD": "SHOULD", "SHOULD NOT": "SHOULD", "RECOMMENDED": "SHOULD", "MAY": "MAY", "OPTIONAL": "MAY"}
"""RFC 2119 keywords and the level each gives a requirement."""


def parse_profiles(text: str | None) -> tuple[str, ...] | None:
    """``messaging,collab`` -> a tuple in :data:`PROFILES` order; ``None`` stays ``None`` (the default)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROFILES]
    if unknown or not names:
        raise ValueError(f"--profiles {text!r}: use a comma-separated list of {', '.join(PROFILES)}")
    return tuple(p for p in PROFILES if p in names)


class Level(enum.IntEnum):
    """Requirement levels; a lower value is stricter."""

    MUST = 1
    SHOULD = 2
    MAY = 3

    @classmethod
    def parse(cls, text: str) -> "Level":
        """``must``/``MUST`` and so on; raises ``ValueError`` for anything else."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown level {text!r}: use must, should or may") from None


@dataclass(frozen=True)
class Requirement:
    id: str
    level: Level
    source: str
    behaviour: str
    divergence: str | None = None
    deferred: str | None = None
    verified_by: str | None = None
    keyword: str | None = None
    """The spec's RFC 2119 keyword (JSON-RPC and MCP requirements): the level follows it."""
    quote: str | None = None
    """The spec's sentence that states the rule, as written (JSON-RPC and MCP requirements)."""
    revisions: tuple[str, ...] = ()
    """The MCP revisions whose text holds the rule; empty: every revision (or none is concerned)."""
    needs: tuple[str, ...] = ()
    """What a run must offer to test it (keys of :data:`NEEDS`)."""
    profile_entry: str | None = None

    @property
    def profile(self) -> str:
        return self.profile_entry or profile_of(self.id)

    @property
    def origin(self) -> Origin:
        return Origin.of(self.source)

    @property
    def source_group(self) -> str:
        """How reports group it: ``JSON-RPC 2.0``, ``MCP <revision>`` or ``messaging contract``."""
        if self.origin is Origin.MCP:
            return " ".join(self.source.split()[:2])
        return self.origin.value

    def applies_to(self, revision: str | None) -> bool:
        """Whether the rule holds under the negotiated MCP ``revision`` (``None``: unknown, assume it does)."""
        return not self.revisions or revision is None or revision in self.revisions

    def citation(self) -> str:
        """The source, and for a JSON-RPC or MCP rule its keyword and sentence: what a failure cites."""
        if self.quote:
            return f"{self.source} ({self.keyword}): \"{self.quote}\""
        return f"{self.source} (the messaging contract's own rule)" if self.origin is Origin.CONTRACT else self.source

    @property
    def outside_suite(self) -> bool:
        """Deferred, or verified by the reference's own tests: the suite casts no votes for it."""
        return bool(self.deferred or self.verified_by)


@dataclass(frozen=True)
class Manifest:
    """Requirements by ID, in manifest order."""

    requirements: tuple[Requirement, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {r.id: r for r in self.requirements})

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.requirements)

    def __len__(self) -> int:
        return len(self.requirements)

    def __contains__(self, requirement_id: object) -> bool:
        return requirement_id in self._by_id  # type: ignore[attr-defined]

    def __getitem__(self, requirement_id: str) -> Requirement:
        return self._by_id[requirement_id]  # type: ignore[attr-defined]


def load_manifest(path: Path = MANIFEST_PATH) -> Manifest:
    """Load and validate the manifest; :class:`ManifestError` names every problem."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path.name}: {exc}") from None
    schema = json.loads(MANIFEST_SCHEMA_PATH.read_text("utf-8"))
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
                for e in Draft202012Validator(schema).iter_errors(data)]
    if problems:
        raise ManifestError(f"{path.name} does not match its schema:\n  " + "\n  ".join(problems))
    requirements = tuple(
        Requirement(id=rid, level=Level[entry["level"]], source=entry["source"], behaviour=entry["behaviour"],
                    divergence=entry.get("divergence"), deferred=entry.get("deferred"),
                    verified_by=entry.get("verified_by"), keyword=entry.get("keyword"), quote=entry.get("quote"),
                    revisions=tuple(entry.get("revisions", ())), needs=tuple(entry.get("needs", ())),
                    profile_entry=entry.get("profile"))
        for rid, entry in data["requirement"].items()
    )
    problems = [p for r in requirements for p in provenance_problems(r)]
    if problems:
        raise ManifestError(f"{path.name}: provenance does not hold:\n  " + "\n  ".join(problems))
    problems = [f"{r.id}: the protocol profile has no home, so it cannot need {FRESH_HOME} (need {FRESH_SERVER})"
                for r in requirements if r.profile == PROTOCOL and FRESH_HOME in r.needs]
    if problems:
        raise ManifestError(f"{path.name}:\n  " + "\n  ".join(problems))
    return Manifest(requirements)


def provenance_problems(requirement: Requirement) -> list[str]:
    """Why ``requirement``'s provenance is wrong: a JSON-RPC or MCP rule without its keyword and sentence, a
    level other than its keyword's, a contract rule dressed in a keyword, a protocol rule of the contract's."""
    rid, origin = requirement.id, requirement.origin
    if origin is Origin.CONTRACT:
        if requirement.keyword or requirement.quote:
            return [f"{rid}: the contract's own rule quotes no spec keyword or sentence"]
        if requirement.profile == PROTOCOL:
            return [f"{rid}: the protocol profile holds JSON-RPC and MCP rules only"]
        return []
    if not requirement.keyword or not requirement.quote:
        return [f"{rid}: a {origin.value} rule quotes its keyword and sentence (keyword, quote)"]
    problems = []
    expected = KEYWORD_LEVELS.get(requirement.keyword)
    if expected is None:
        problems.append(f"{rid}: keyword {requirement.keyword!r} is not an RFC 2119 keyword")
    elif expected != requirement.level.name:
        problems.append(f"{rid}: its source says {requirement.keyword}, so its level is {expected}, "
                        f"not {requirement.level.name}")
    if requirement.keyword.split()[0] not in requirement.quote:
        problems.append(f"{rid}: the quoted sentence does not hold the keyword {requirement.keyword}")
    if origin is Origin.JSON_RPC and requirement.revisions:
        problems.append(f"{rid}: revisions are MCP's; a JSON-RPC 2.0 rule holds in every one")
    return problems


@lru_cache(maxsize=1)
def manifest() -> Manifest:
    """The project's manifest, loaded once per process."""
    return load_manifest()


@dataclass(frozen=True)
class Selection:
    """Which requirements a run is about.

    ``profiles`` are the tool profiles under test (a profile the target does not
    offer is left out, so its requirements are reported not tested).
    ``level`` includes every stricter level (``SHOULD`` selects MUST and SHOULD).
    ``patterns`` narrow further: an exact ID, a glob (``wire:*``) or an ID prefix
    up to a colon (``send`` selects ``send:…``). No patterns means all IDs.
    """

    level: Level = Level.MAY
    patterns: tuple[str, ...] = ()
    profiles: tuple[str, ...] = PROFILES
    offers: tuple[str, ...] = tuple(n for n in NEEDS if n not in ISOLATION_NEEDS)
    """What the run offers of :data:`NEEDS` (a requirement needing more is not selected)."""

    def lacks(self, requirement: Requirement) -> tuple[str, ...]:
        """What ``requirement`` needs that this run does not offer (every run meets :data:`ISOLATION_NEEDS`)."""
        return tuple(n for n in requirement.needs if n not in self.offers and n not in ISOLATION_NEEDS)

    def includes(self, requirement: Requirement) -> bool:
        if requirement.profile not in self.profiles or self.lacks(requirement):
            return False
        if requirement.level > self.level:
            return False
        if not self.patterns:
            return True
        return any(fnmatchcase(requirement.id, p) or fnmatchcase(requirement.id, p.rstrip(":") + ":*")
                   for p in self.patterns)

    def to_json(self) -> dict:
        return {"level": self.level.name, "patterns": list(self.patterns), "profiles": list(self.profiles),
                "offers": list(self.offers)}


REQUIREMENT_ATTRIBUTE = "contract_requirement"


ALSO_ATTRIBUTE = "contract_also"


def requirement(requirement_id: str, *, also: tuple[str, ...] = ()):
    """Declare the one requirement a test verifies (checked against the manifest).

    Suite tests (``harness/contract/suite``) must declare one; the reference's
    own tests (``tests/``) declare one where their assertions prove a
    requirement's sentence, which is how a ``verified_by`` requirement is
    covered (the meta-test reads these declarations). ``also``: requirements
    the same exchange proves besides (a stricter rule of the contract's judged
    from the protocol profile's fuzz, say); the test votes for them itself, and
    runs when any of its requirements is selected. An unknown ID raises at
    import time, so a typo fails collection instead of silently testing nothing.
    """
    for rid in (requirement_id, *also):
        if rid not in manifest():
            raise ManifestError(f"{rid!r} is not in {MANIFEST_PATH.name}")

    def mark(function):
        setattr(function, REQUIREMENT_ATTRIBUTE, requirement_id)
        setattr(function, ALSO_ATTRIBUTE, tuple(also))
        return function

    return mark
