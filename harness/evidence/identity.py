"""Which scenario run a result, a report section or a test case is: its :class:`RunIdentity`.

A scenario runs once per mode it declares, and the same scenario and mode can
run again with another persona of the scripted model, another provider or as
another trial. Those four together, (scenario, mode, persona/provider, trial),
name one scenario run everywhere a run is shown or matched: report headings,
``runner.py report``, ``report --compare``, JUnit class names, artifacts
folders, shard plans and merges. Matching on the scenario name alone would let
a failure in one mode hide behind a pass in another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_PROVIDER = "scripted"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True, order=True)
class RunIdentity:
    """(scenario, mode, persona, provider, trial); ``None`` where a run does not vary it."""

    scenario: str
    mode: str | None = None
    persona: str | None = None
    provider: str | None = None
    trial: int | None = None

    @classmethod
    def of(cls, entry: Mapping[str, Any], *, provider: Any = None) -> "RunIdentity":
        """The identity of a runner result or report section.

        Reads ``name`` (or ``scenario``), ``mode``, ``persona``, ``provider`` and
        ``trial`` from the entry itself or from its ``identity`` object; the
        run's ``provider`` stands in for an entry that names none.
        """
        own = entry.get("identity") if isinstance(entry.get("identity"), Mapping) else {}

        def field(*keys: str) -> Any:
            for key in keys:
                for source in (own, entry):
                    if source.get(key) is not None:
                        return source[key]
            return None

        trial = field("trial")
        return cls(scenario=str(field("scenario", "name")), mode=field("mode"), persona=field("persona"),
                   provider=_provider_name(field("provider") or provider),
                   trial=int(trial) if trial is not None else None)

    def key(self) -> tuple[str, str, str, str, int]:
        """A sortable, total key (absent parts compare as empty / trial 1)."""
        return (self.scenario, self.mode or "", self.persona or "", self.provider or DEFAULT_PROVIDER,
                self.trial or 1)

    def label(self) -> str:
        """For people: ``modes · attached · scripted``, plus `` · persona P`` and `` · trial N`` when set."""
        parts = [self.scenario, self.mode or "no mode", self.provider or DEFAULT_PROVIDER]
        if self.persona:
            parts.append(f"persona {self.persona}")
        if self.trial is not None:
            parts.append(f"trial {self.trial}")
        return " · ".join(parts)

    def slug(self) -> str:
        """A folder and anchor name: ``modes.attached``, with ``.<persona>``, ``.<provider>`` (unless
        scripted) and ``.t<N>`` (from trial 2 on) when set, each part reduced to letters, digits, ``-``
        and ``_``. Two identities with the same :meth:`key` have the same slug."""
        parts = [self.scenario, self.mode or "none"]
        if self.persona:
            parts.append(self.persona)
        if self.provider and self.provider != DEFAULT_PROVIDER:
            parts.append(self.provider)
        if (self.trial or 1) != 1:
            parts.append(f"t{self.trial}")
        return ".".join(_UNSAFE.sub("_", part) for part in parts)

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "mode": self.mode, "persona": self.persona, "provider": self.provider,
                "trial": self.trial, "label": self.label(), "slug": self.slug()}


def _provider_name(provider: Any) -> str | None:
    if isinstance(provider, Mapping):
        return str(provider.get("name") or provider.get("provider") or "") or None
    return str(provider) if provider else None
