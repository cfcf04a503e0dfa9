"""``python runner.py drift --codex-version V``: what would change for peerwire on Codex V.

It answers before anyone moves the pin, in seven steps, each announced on stderr:

1. install V from the npm registry into the release cache
   (:func:`harness.codex.install.install_release`); the pinned install is not touched;
2. generate V's and the pinned version's app-server schemas and compare them on
   the surface peerwire uses (:mod:`harness.codex.surface_diff`);
3. validate every recorded fixture (``fixtures/appserver/``) against V's schema
   (:func:`harness.codex.protocol.check_fixture`);
4. detect and probe the capabilities of both versions (:mod:`harness.codex.capability_probe`);
5. run every live delivery route (:mod:`harness.lab.recorded.routes`) with V,
   recording V's exchange the way ``runner.py record`` would, and compare its
   outline (the requests peerwire sent, the answers, and the notifications the
   adapter acts on) with the pinned fixture; a route that needs a capability V
   lacks is skipped, naming it;
6. run the ``smoke`` acceptance scenario with V;
7. write ``drift.json`` and ``drift.md`` (:mod:`harness.acceptance.drift_report`).

Exit status: 0 when nothing peerwire uses differs (no breaking method, every
fixture, route and the smoke run pass), 1 when something does, 2 when V cannot
be installed or run.
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


from harness.acceptance import drift_report
from harness.capabilities import Capability
from harness.codex.capability_probe import CapabilityReport, establish
from harness.codex.install import CodexInstallation, CodexInstallError, install_release, locate_codex
from harness.codex.protocol import ProtocolSchema, ProtocolSchemaError, check_fixture
from harness.lab.recorded import routes
from harness.acceptance.record import record
from harness.codex.fixtures import FIXTURE_DIR, load
from harness.codex.surface_diff import diff_surface
from harness.process.jobs import Job

SMOKE = "smoke"
SMOKE_TIMEOUT_S = 600.0

ROUTE_NEEDS: dict[str, tuple[Capability, ...]] = {
    "idle_start": (Capability.IDLE_START,),
    "explicit_reply": (Capability.IDLE_START,),
    "steer": (Capability.IDLE_START, Capability.STEER),
    "interrupt": (Capability.IDLE_START, Capability.INTERRUPT),
    "failed_turn": (Capability.IDLE_START,),
    "oversized_final": (Capability.IDLE_START,),
    "inject": (Capability.IDLE_START, Capability.INJECT),
    "resume": (Capability.IDLE_START, Capability.RESUME),
    "stale_steer": (Capability.IDLE_START, Capability.STEER),
}
"""The capabilities each live route exercises: without them it is skipped, never attempted."""

OBSERVED = ("turn/started", "item/completed", "turn/completed")
"""The notifications the adapter's watcher acts on: the ones a route's outline keeps."""


@dataclass
class RouteResult:
    name: str
    status: str  # pass | fail | skipped
    detail: str
    differences: list[str] = field(default_factory=list)
    outline: list[str] = field(default_factory=list)
    fixture: str | None = None
    """V's recorded exchange, relative to the report folder."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "differences": self.differences,
                "outline": self.outline, "fixture": self.fixture}


def exchange_outline(lines: Sequence[dict[str, Any]]) -> list[str]:
    """What a recorded exchange says on the surface the adapter observes, one line per event.

    ``-> method`` a request peerwire sent; ``<= method ok|error CODE`` its answer;
    ``<- method ...`` a notification the adapter acts on, with the values it
    branches on (item type and phase, the final text, the tool; turn status).
    Params peerwire sends are left out: they depend on the adapter's own
    gating, which the method-level diff reports.
    """
    out: list[str] = []
    methods: dict[Any, str] = {}
    for line in lines:
        if line["dir"] == "session":
            out.append(f"session {line.get('generation')}")
            methods.clear()
            continue
        message = line.get("message") or {}
        method = message.get("method")
        params = message.get("params") or {}
        if line["dir"] == "sent" and method and "id" in message:
            methods[message["id"]] = method
            out.append(f"-> {method}")
        elif line["dir"] == "received" and method is None and message.get("id") in methods:
            error = message.get("error")
            out.append(f"<= {methods[message['id']]} " + (f"error {error.get('code')}" if error else "ok"))
        elif line["dir"] == "received" and method in OBSERVED and "id" not in message:
            out.append(_observed(method, params))
    return [line for line in out if line]


def _observed(method: str, params: dict[str, Any]) -> str:
    if method == "item/completed":
        item = params.get("item") or {}
        if item.get("type") == "agentMessage":
            text = str(item.get("text") or "")
            return f"<- item/completed agentMessage {item.get('phase')} {text[:40]!r}{'…' if len(text) > 40 else ''}"
        if item.get("type") == "mcpToolCall":
            return f"<- item/completed mcpToolCall {item.get('tool')} {item.get('status')}"
        return ""
    if method == "turn/completed":
        return f"<- turn/completed {(params.get('turn') or {}).get('status')}"
    return f"<- {method}"


class Drift:
    """One drift run: its settings, progress output and results (see the module docs)."""

    def __init__(self, version: str, *, report_dir: Path, cache: Path | None, route_names: Sequence[str],
                 smoke: bool, say: Callable[[str], None]):
        self.version = version
        self.report_dir = report_dir
        self.cache = cache
        self.route_names = list(route_names)
        self.smoke = smoke
        self.say = say
        self.step = 0

    def announce(self, text: str) -> None:
        self.step += 1
        self.say(f"[{self.step}/7] {text}")

    def run(self) -> tuple[Path, bool]:
        """Run every step and write the report; returns its folder and whether anything differed."""
        began, started_at = time.monotonic(), _now()
        self.announce(f"installing Codex {self.version} into the release cache")
        candidate = install_release(self.version, cache=self.cache, progress=self.say)
        pinned = locate_codex()
        folder = drift_report.new_folder(self.report_dir, self.version)
        with tempfile.TemporaryDirectory(prefix="peerwire-drift-") as scratch:
            work = Path(scratch)
            self.announce(f"comparing the app-server schemas of {pinned.version} (pinned) and {self.version}")
            base = ProtocolSchema.generate(pinned, work / "schema-pinned")
            other = ProtocolSchema.generate(candidate, work / "schema-candidate")
            methods = diff_surface(base, other)
            self.say("methods: " + ", ".join(f"{sum(m.verdict == v for m in methods)} {v}"
                                             for v in ("breaking", "additive", "unchanged")))
            self.announce(f"validating {len(list(FIXTURE_DIR.glob('*.jsonl')))} recorded fixtures against "
                          f"Codex {self.version}'s schema")
            fixtures = [check_fixture(path, other, strict=False) for path in sorted(FIXTURE_DIR.glob("*.jsonl"))]
            self.say("fixtures: " + " ".join(f"{f.fixture} {'✓' if f.ok else '✗'}" for f in fixtures))
            self.announce("probing the capabilities of both versions (connection, attachment, input)")
            capabilities = {"pinned": establish(pinned, folder / "capabilities" / "pinned"),
                            "candidate": establish(candidate, folder / "capabilities" / "candidate")}
            self.say(f"capabilities of {self.version}: {capabilities['candidate'].summary()}")
            self.announce(f"running {len(self.route_names)} live delivery routes with Codex {self.version}")
            route_results = [self._route(name, candidate, capabilities["candidate"], folder)
                             for name in self.route_names]
            self.announce(f"running the {SMOKE} scenario with Codex {self.version}")
            smoke = self._smoke(candidate, capabilities["candidate"], folder, work) if self.smoke else {
                "status": "skipped", "detail": "not requested (--no-smoke)"}
        self.announce("writing the report")
        result = {
            "drift_version": 1, "codex_version": self.version, "pinned_version": pinned.version,
            "started_at": started_at, "finished_at": _now(), "wall_s": round(time.monotonic() - began, 1),
            "candidate": {"executable": str(candidate.executable), "source": candidate.source},
            "methods": [m.to_json() for m in methods],
            "fixtures": [f.to_json() for f in fixtures],
            "capabilities": {side: report.to_json() for side, report in capabilities.items()},
            "routes": [r.to_json() for r in route_results],
            "smoke": smoke,
        }
        result["summary"] = drift_report.summary(result)
        drift_report.write(folder, result)
        return folder, result["summary"]["drifted"]

    def _route(self, name: str, codex: CodexInstallation, capabilities: CapabilityReport,
               folder: Path) -> RouteResult:
        missing = [c for c in ROUTE_NEEDS[name] if c not in capabilities.enabled()]
        if missing:
            result = RouteResult(name, "skipped", f"needs {missing[0].value}: {capabilities.why_not(missing[0])}")
        else:
            result = self._run_route(name, codex, folder)
        mark = {"pass": "✓", "fail": "✗", "skipped": "–"}[result.status]
        self.say(f"route {name} {mark} {result.detail}")
        return result

    def _run_route(self, name: str, codex: CodexInstallation, folder: Path) -> RouteResult:
        began = time.monotonic()
        try:
            recorded = record(name, folder / "fixtures", codex=codex)
        except Exception as error:  # a route that breaks is a finding, not a crash of the drift run
            where = traceback.extract_tb(error.__traceback__)[-1]
            return RouteResult(name, "fail", f"{type(error).__name__}: {str(error)[:300]} "
                                             f"(at {Path(where.filename).name}:{where.lineno})")
        outline = exchange_outline(load(recorded))
        relative = recorded.relative_to(folder).as_posix()
        pinned_fixture = FIXTURE_DIR / f"{name}.jsonl"
        if not pinned_fixture.is_file():
            return RouteResult(name, "pass", "completed; no pinned fixture to compare with", outline=outline,
                               fixture=relative)
        expected = exchange_outline(load(pinned_fixture))
        wall = f"{time.monotonic() - began:.1f}s"
        if outline == expected:
            return RouteResult(name, "pass", f"completed in {wall}; the exchange matches the pinned fixture",
                               outline=outline, fixture=relative)
        differences = list(difflib.unified_diff(expected, outline, "pinned fixture", f"Codex {self.version}",
                                                lineterm="", n=1))
        return RouteResult(name, "fail", f"completed in {wall}, but the exchange differs from the pinned fixture",
                           differences, outline, relative)

    def _smoke(self, codex: CodexInstallation, capabilities: CapabilityReport, folder: Path,
               work: Path) -> dict[str, Any]:
        from harness.acceptance.scenario import discover

        scenario = next(s for s in discover() if s.name == SMOKE)
        missing = [name for name in scenario.needs("attached") if name not in capabilities.enabled_names()]
        if missing:
            detail = f"needs {missing[0]}: {capabilities.why_not(Capability(missing[0]))}"
            self.say(f"{SMOKE} – {detail}")
            return {"status": "skipped", "detail": detail}
        out = folder / "smoke"
        argv = [sys.executable, "-m", "harness.cli", "accept", "--scenario", SMOKE, "--codex",
                str(codex.executable), "--expected-version", codex.version, "--report-dir", str(out),
                "--runs-root", str(work / "runs")]
        with Job("drift smoke") as job:
            process = job.spawn(argv, name=f"{SMOKE} run", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            assert process.popen.stderr is not None
            lines = []
            with process.popen.stderr as stream:
                for raw in stream:
                    line = raw.decode("utf-8", errors="replace").rstrip()
                    lines.append(line)
                    self.say(f"{SMOKE}: {line}")
            status = process.popen.wait(timeout=SMOKE_TIMEOUT_S)
        reports = sorted(p.relative_to(folder).as_posix() for p in out.glob("*/report.json")) if out.is_dir() else []
        failed = [line.strip() for line in lines if line.startswith("        ") and ":" in line][:10]
        result = {"status": "pass" if status == 0 else "fail", "exit_status": status, "report": reports[:1],
                  "detail": "every check passed" if status == 0 else "; ".join(failed) or (lines or ["no output"])[-1]}
        self.say(f"{SMOKE} {'✓' if status == 0 else '✗'} {result['detail']}")
        return result


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def main(argv: Sequence[str] | None = None) -> int:
    every = [*routes.ROUTES, *routes.INPROCESS_ROUTES]
    parser = argparse.ArgumentParser(
        prog="peerwire-harness drift",
        description="Install another Codex release and report what would change for peerwire on it: the protocol "
                    "methods and fields peerwire uses, the recorded fixtures, the capabilities, the live delivery "
                    "routes and the smoke scenario.")
    parser.add_argument("--codex-version", required=True, metavar="V", help="the Codex release to examine (npm)")
    parser.add_argument("--report-dir", type=Path, default=Path("reports").absolute(),
                        help="where drift-<V>-<time>/ is written (default: reports/)")
    parser.add_argument("--cache", type=Path, help="the release cache (default: $PEERWIRE_CODEX_CACHE, "
                                                   "else $XDG_CACHE_HOME/peerwire/codex, else ~/.cache/peerwire/codex)")
    parser.add_argument("--route", action="append", default=[], metavar="NAME", choices=every,
                        help=f"run only this live route (repeatable; default: all of {', '.join(every)})")
    parser.add_argument("--no-smoke", action="store_true", help="do not run the smoke scenario")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"drift: {line}", file=sys.stderr, flush=True)

    drift = Drift(args.codex_version, report_dir=args.report_dir, cache=args.cache,
                  route_names=args.route or every, smoke=not args.no_smoke, say=say)
    try:
        folder, drifted = drift.run()
    except (CodexInstallError, ProtocolSchemaError) as error:
        say(f"error: {error}")
        return 2
    say(f"report: {folder}")
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
