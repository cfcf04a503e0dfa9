"""Which scenario run a result, a report section or a test case is: its :class:`RunIdentity`.

A scenario runs once per mode it declares, and the same scenario and mode can
run again with another persona of the scripted model, another provider, as
another trial, or with another pair of agent kinds (``runner.py --agents
codex,opencode``: A's kind, then B's). Those together, (scenario, mode,
persona/provider, trial, pair), name one scenario run everywhere a run is shown
or matched: report headings,
``runner.py report``, ``report --compare``, JUnit class names, artifacts
folders, shard plans and merges. Matching on the scenario name alone would let
a failure in one mode hide behind a pass in another. The default pair
(``codex,codex``) is no part of a label or slug, so runs made before pairs
existed keep their identity.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_PROVIDER = "scripted"
DEFAULT_PAIR = "codex,codex"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True, order=True)
class RunIdentity:
    """(scenario, mode, persona, provider, trial, pair); ``None`` where a run does not vary it."""

    scenario: str
    mode: str | None = None
    persona: str | None = None
    provider: str | None = None
    trial: int | None = None
    pair: str | None = None
    """The agents' kinds, A's then B's (``codex,opencode``); ``None`` (or :data:`DEFAULT_PAIR`) for two Codex."""

    def __post_init__(self) -> None:
        if self.pair == DEFAULT_PAIR:
            object.__setattr__(self, "pair", None)

    @classmethod
    def of(cls, entry: Mapping[str, Any], *, provider: Any = None) -> "RunIdentity":
        """The identity of a runner result or report section.

        Reads ``name`` (or ``scenario``), ``mode``, ``persona``, ``provider``,
        ``trial`` and ``pair`` from the entry itself or from its ``identity``
        object; the run's ``provider`` stands in for an entry that names none.
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
                   trial=int(trial) if trial is not None else None, pair=field("pair"))

    @property
    def kinds(self) -> tuple[str, str]:
        """A's kind and B's."""
        first, _, second = (self.pair or DEFAULT_PAIR).partition(",")
        return first, second

    def key(self) -> tuple[str, str, str, str, int, str]:
        """A sortable, total key (absent parts compare as empty / trial 1; the default pair first)."""
        return (self.scenario, self.mode or "", self.persona or "", self.provider or DEFAULT_PROVIDER,
                self.trial or 1, self.pair or "")

    def label(self) -> str:
        """For people: ``modes · attached · scripted``, plus `` · codex→opencode`` (a pair other than two Codex),
        `` · persona P`` and `` · trial N`` when set."""
        parts = [self.scenario, self.mode or "no mode", self.provider or DEFAULT_PROVIDER]
        if self.pair:
            parts.append("→".join(self.kinds))
        if self.persona:
            parts.append(f"persona {self.persona}")
        if self.trial is not None:
            parts.append(f"trial {self.trial}")
        return " · ".join(parts)

    def slug(self) -> str:
        """A folder and anchor name: ``modes.attached``, with ``.<persona>``, ``.<provider>`` (unless
        scripted), ``.t<N>`` (from trial 2 on) and ``.<A kind>-<B kind>`` (a pair other than two Codex) when
        set, each part reduced to letters, digits, ``-`` and ``_``. Two identities with the same :meth:`key`
        have the same slug."""
        parts = [self.scenario, self.mode or "none"]
        if self.persona:
            parts.append(self.persona)
        if self.provider and self.provider != DEFAULT_PROVIDER:
            parts.append(self.provider)
        if (self.trial or 1) != 1:
            parts.append(f"t{self.trial}")
        if self.pair:
            parts.append("-".join(_UNSAFE.sub("_", kind) for kind in self.kinds))
        return ".".join(_UNSAFE.sub("_", part) for part in parts)

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "mode": self.mode, "persona": self.persona, "provider": self.provider,
                "trial": self.trial, "pair": self.pair, "label": self.label(), "slug": self.slug()}


def _provider_name(provider: Any) -> str | None:
    if isinstance(provider, Mapping):
        return str(provider.get("name") or provider.get("provider") or "") or None
    return str(provider) if provider else None
