"""Recorded app-server exchanges: regression fixtures for the Codex adapter.

``python runner.py record [ROUTE ...]`` runs each delivery route
(:mod:`harness.lab.recorded.routes`) live against the pinned Codex and the scripted
model, then writes agent B's app-server exchange, both directions in order,
to ``fixtures/appserver/<route>.jsonl``. Ids, timestamps and machine paths are
replaced with stable placeholders (``<thread:1>``, ``<turn:2>``, ``<path:workspace>``,
``<time>``) so a fixture only changes when the protocol does; nothing secret
is in them (the recorder refuses to write a fixture that contains a session
token or the model key).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable

from harness.lab.reference import TRANSCRIPTS, ReferenceLab
from harness.codex.fixtures import FIXTURE_DIR
from harness.codex.install import CodexInstallation
from harness.codex.home import MODEL_KEY_VALUE
from harness.lab.recorded import routes
from harness.evidence.layout import transcript_name
from harness.evidence.secrets import SecretScan

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_PEERWIRE_ID = re.compile(r"\b(rq|ix|cl|bd)_[0-9a-f]{32}\b")
_CALL_ID = re.compile(r"\bcall_[A-Za-z0-9_-]+\b")
_ITEM_ID = re.compile(r"\b(msg|fc|rs|item)_[A-Za-z0-9]+\b")
_TIME_KEYS = {"createdAt", "updatedAt", "startedAt", "completedAt", "completedAtMs", "startedAtMs",
              "emittedAtMs", "durationMs", "timestamp", "wall", "mono", "recordedAt", "recencyAt"}
_ROLLOUT_TIME = re.compile(r"sessions/\d{4}/\d{2}/\d{2}/rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}")
# Values that describe the recording machine, not the protocol.
_MACHINE_KEYS = {"serverName": "<host>", "userAgent": "<user-agent>"}


class Normaliser:
    """Replaces run-specific values with placeholders, consistently within one fixture.

    Paths first (longest first, so a workspace inside the root is named, not half-replaced), then the ids
    of the protocol (:meth:`ids`: another protocol's fixtures override it, and :attr:`time_keys`)."""

    time_keys = _TIME_KEYS
    machine_keys = _MACHINE_KEYS

    def __init__(self, paths: dict[str, str]):
        self.paths = sorted(paths.items(), key=lambda kv: -len(kv[1]))
        self.seen: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def name(self, kind: str, value: str) -> str:
        """``<kind:N>``, the same N for the same value throughout the fixture."""
        if value not in self.seen:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.seen[value] = f"<{kind}:{self.counts[kind]}>"
        return self.seen[value]

    def text(self, value: str) -> str:
        for name, path in self.paths:
            value = value.replace(path, f"<path:{name}>")
        return self.ids(value)

    def ids(self, value: str) -> str:
        value = _ROLLOUT_TIME.sub("sessions/<date>/rollout-<time>", value)
        value = _PEERWIRE_ID.sub(lambda m: self.name(m.group(1), m.group(0)), value)
        value = _UUID.sub(lambda m: self.name("id", m.group(0)), value)
        value = _CALL_ID.sub(lambda m: self.name("call", m.group(0)), value)
        return _ITEM_ID.sub(lambda m: self.name("item", m.group(0)), value)

    def value(self, value: Any, key: str | None = None) -> Any:
        if key in self.time_keys and isinstance(value, (int, float)) and not isinstance(value, bool):
            return 0
        if key in self.time_keys and isinstance(value, str):
            return "<time>"
        if key in self.machine_keys and isinstance(value, str):
            return self.machine_keys[key]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        return value


def normalise(entries: Iterable[dict[str, Any]], normaliser: Normaliser) -> list[dict[str, Any]]:
    """Fixture lines: ``{"dir", "message"}`` (or ``{"dir": "session", "generation"}`` markers)."""
    out = []
    for entry in entries:
        if entry.get("dir") == "session":
            out.append(entry)
        elif "message" in entry:
            out.append({"dir": entry["dir"], "message": normaliser.value(entry["message"])})
    return out


def _run_lab_route(route: str, root: Path,
                  codex: CodexInstallation | None) -> tuple[Path, list[str], Normaliser]:
    script = routes.model_script()
    with ReferenceLab(root, script, agents=("A", "B"), attach=False, codex=codex) as lab:
        lab.attach("B")
        routes.ROUTES[route](lab)
        secrets = [a.token for a in lab.agents.values()]
        normaliser = Normaliser({"workspace": str(lab.agents["B"].workspace),
                                 "codex_home": str(lab.agents["B"].codex_home), "root": str(root),
                                 "codex": str(lab.codex.executable.parent)})
    return lab.home.path / TRANSCRIPTS, secrets, normaliser


def _run_inprocess_route(route: str, root: Path,
                        codex: CodexInstallation | None) -> tuple[Path, list[str], Normaliser]:
    import asyncio

    from harness.lab.inprocess import inprocess_adapter

    script = routes.model_script()

    async def run() -> tuple[list[str], Normaliser]:
        async with inprocess_adapter(root, script, codex) as lab:
            await routes.INPROCESS_ROUTES[route](lab.provider, lab.store, lab.requester, lab.recipient)
            return [lab.token], Normaliser({"workspace": str(lab.workspace), "codex_home": str(lab.codex_home),
                                            "root": str(root)})

    secrets, normaliser = asyncio.run(run())
    return root / "core" / "codex", secrets, normaliser


def record(route: str, out_dir: Path = FIXTURE_DIR, codex: CodexInstallation | None = None) -> Path:
    """Run one delivery route live with ``codex`` (default: the pinned Codex) and write its normalised fixture."""
    runner = _run_inprocess_route if route in routes.INPROCESS_ROUTES else _run_lab_route
    with tempfile.TemporaryDirectory(prefix="peerwire-record-") as tmp:
        root = Path(tmp)
        transcripts, secrets, normaliser = runner(route, root, codex)
        secrets.append(MODEL_KEY_VALUE)
        entries: list[dict[str, Any]] = []
        for generation in (1, 2):
            transcript = transcripts / transcript_name("B", generation)
            if transcript.exists():
                entries.append({"dir": "session", "generation": generation})
                entries += [json.loads(line) for line in transcript.read_text("utf-8").splitlines()]
        lines = normalise(entries, normaliser)
    text = "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines)
    leaked = SecretScan({f"secret {number}": value for number, value in enumerate(secrets, 1)}).found_in(text)
    if leaked:
        raise RuntimeError(f"refusing to write {route}: {len(leaked)} secret value(s) in the exchange")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{route}.jsonl"
    target.write_text(text, "utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="peerwire-harness record",
                                     description="Refresh the adapter fixtures from the pinned Codex.")
    parser.add_argument("routes", nargs="*", metavar="ROUTE",
                        help="delivery routes to record (default: all; see harness.lab.recorded.routes)")
    parser.add_argument("--out", type=Path, default=FIXTURE_DIR)
    args = parser.parse_args(argv)
    every = [*routes.ROUTES, *routes.INPROCESS_ROUTES]
    unknown = sorted(set(args.routes) - set(every))
    if unknown:
        parser.error(f"unknown route(s): {', '.join(unknown)}")
    for name in args.routes or every:
        target = record(name, args.out)
        print(f"recorded {name}: {target} ({sum(1 for _ in target.open())} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
