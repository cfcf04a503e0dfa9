"""The requirement manifest (``contracts/requirements.toml``) and run selection.

A requirement has a stable ID ``area:feature[:variant]``, a level (MUST, SHOULD,
MAY), its source, one sentence of behaviour and optionally a known divergence,
the reason it is deferred, or ``verified_by``: where the reference proves a
behaviour the black-box suite cannot observe (a provider turn, a live Codex
thread), in its own tests. Each requirement belongs to one tool profile: the
area ``collab`` is the collaboration profile's, every other area the messaging
profile's. A :class:`Selection` picks the requirements a run is about: the
profiles the target offers, everything up to a level, optionally narrowed to
ID patterns.
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


PROFILES: tuple[str, ...] = profiles.ALL
"""Tool profiles: ``messaging`` (contract v1, ``contracts/tools``) and ``collab`` (``contracts/collab``)."""


def profile_of(requirement_id: str) -> str:
    """The profile a requirement (or its ID's area) belongs to."""
    return "collab" if requirement_id.partition(":")[0] == "collab" else "messaging"


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

    @property
    def profile(self) -> str:
        return profile_of(self.id)

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
    return Manifest(tuple(
        Requirement(id=rid, level=Level[entry["level"]], source=entry["source"], behaviour=entry["behaviour"],
                    divergence=entry.get("divergence"), deferred=entry.get("deferred"),
                    verified_by=entry.get("verified_by"))
        for rid, entry in data["requirement"].items()
    ))


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

    def includes(self, requirement: Requirement) -> bool:
        if requirement.profile not in self.profiles:
            return False
        if requirement.level > self.level:
            return False
        if not self.patterns:
            return True
        return any(fnmatchcase(requirement.id, p) or fnmatchcase(requirement.id, p.rstrip(":") + ":*")
                   for p in self.patterns)

    def to_json(self) -> dict:
        return {"level": self.level.name, "patterns": list(self.patterns), "profiles": list(self.profiles)}


REQUIREMENT_ATTRIBUTE = "contract_requirement"


def requirement(requirement_id: str):
    """Declare the one requirement a test verifies (checked against the manifest).

    Suite tests (``harness/contract/suite``) must declare one; the reference's
    own tests (``tests/``) declare one where their assertions prove a
    requirement's sentence, which is how a ``verified_by`` requirement is
    covered (the meta-test reads these declarations). An unknown ID raises at
    import time, so a typo fails collection instead of silently testing nothing.
    """
    if requirement_id not in manifest():
        raise ManifestError(f"{requirement_id!r} is not in {MANIFEST_PATH.name}")

    def mark(function):
        setattr(function, REQUIREMENT_ATTRIBUTE, requirement_id)
        return function

    return mark
