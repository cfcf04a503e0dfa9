"""The drift report: ``reports/drift-<version>-<time>/drift.json`` and ``drift.md``.

The folder is private like the run reports (folders 0700, files 0600) and
also holds the probe evidence of both versions (``capabilities/``), V's
recorded exchange of every live route (``fixtures/``) and the smoke run's own
report (``smoke/``). ``drift.md`` is rendered from the JSON alone: the verdict
per method, ✓/✗ per fixture and live route, the capabilities side by side,
and a sequence diagram of each route's exchange with V.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.private import DIR_MODE, FILE_MODE, private_dir, write_private

JSON_NAME = "drift.json"
MD_NAME = "drift.md"
_MARK = {"pass": "✓", "fail": "✗", "skipped": "–"}


def new_folder(report_dir: Path, version: str) -> Path:
    """A new private folder ``drift-<version>-<UTC time>`` under ``report_dir``."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    return private_dir(Path(report_dir) / f"drift-{version}-{stamp}")


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """Counts per verdict and status, and whether anything peerwire uses differs (``drifted``)."""
    methods = {verdict: sum(m["verdict"] == verdict for m in result["methods"])
               for verdict in ("breaking", "additive", "unchanged")}
    routes = {status: sum(r["status"] == status for r in result["routes"]) for status in ("pass", "fail", "skipped")}
    fixtures_failed = sum(not f["ok"] for f in result["fixtures"])
    capabilities = result["capabilities"]["candidate"]["capabilities"]
    lost = [name for name, pinned in result["capabilities"]["pinned"]["capabilities"].items()
            if pinned["enabled"] and not capabilities[name]["enabled"]]
    drifted = bool(methods["breaking"] or fixtures_failed or routes["fail"] or routes["skipped"] or lost
                   or result["smoke"]["status"] != "pass")
    return {"methods": methods, "fixtures_failed": fixtures_failed, "fixtures": len(result["fixtures"]),
            "routes": routes, "capabilities_lost": lost, "smoke": result["smoke"]["status"], "drifted": drifted}


def write(folder: Path, result: dict[str, Any]) -> None:
    """Write ``drift.json`` and ``drift.md``, and make everything in ``folder`` private (0700/0600)."""
    write_private(folder / JSON_NAME, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    write_private(folder / MD_NAME, render(result))
    # The probe evidence and the recorded exchanges were written by tools that use the umask.
    for path in folder.rglob("*"):
        if not path.is_symlink():
            path.chmod(DIR_MODE if path.is_dir() else FILE_MODE)


def render(result: dict[str, Any]) -> str:
    version, pinned, totals = result["codex_version"], result["pinned_version"], result["summary"]
    methods = totals["methods"]
    out = [
        f"# Codex drift: {pinned} (pinned) → {version}",
        "",
        f"- Verdict: **{'peerwire is affected' if totals['drifted'] else 'nothing peerwire uses differs'}**",
        f"- Methods, notifications and server requests peerwire uses: {methods['breaking']} breaking, "
        f"{methods['additive']} additive, {methods['unchanged']} unchanged",
        f"- Recorded fixtures valid against {version}: {totals['fixtures'] - totals['fixtures_failed']}/"
        f"{totals['fixtures']}",
        f"- Live delivery routes: {totals['routes']['pass']} ✓, {totals['routes']['fail']} ✗, "
        f"{totals['routes']['skipped']} skipped",
        f"- Smoke scenario: {_MARK.get(totals['smoke'], totals['smoke'])} {totals['smoke']}",
        f"- Capabilities lost: {', '.join(totals['capabilities_lost']) or 'none'}",
        f"- Run {result['started_at']} – {result['finished_at']} ({result['wall_s']} s); {version} from "
        f"{result['candidate']['source']}",
        "",
        "## Protocol surface",
        "",
        "Only what peerwire sends or reads is compared (peerwire/codex/surface.py).",
        "",
        "| method | kind | verdict | changes |",
        "|---|---|---|---|",
    ]
    order = {"breaking": 0, "additive": 1, "unchanged": 2}
    for method in sorted(result["methods"], key=lambda m: order[m["verdict"]]):
        changes = "<br>".join(_cell(c) for c in method["changes"]) or "—"
        out.append(f"| `{method['method']}` | {method['kind'].replace('_', ' ')} | {method['verdict']} | {changes} |")
    out += ["", f"## Recorded fixtures against {version}'s schema", "", "| fixture | | messages checked | errors |",
            "|---|---|---|---|"]
    for fixture in result["fixtures"]:
        errors = "<br>".join(_cell(e) for e in fixture["errors"]) or "—"
        extra = f" (notifications {version} does not send: {', '.join(fixture['not_offered'])})" \
            if fixture["not_offered"] else ""
        out.append(f"| {fixture['fixture']} | {'✓' if fixture['ok'] else '✗'} | {fixture['checked']} | "
                   f"{errors}{_cell(extra)} |")
    out += _capabilities(result)
    out += ["", f"## Live delivery routes with {version}", "",
            "Each route runs against the real Codex and the scripted model; its exchange is compared with the "
            "pinned fixture on what the adapter observes.", "", "| route | | detail |", "|---|---|---|"]
    for route in result["routes"]:
        out.append(f"| {route['name']} | {_MARK[route['status']]} | {_cell(route['detail'])} |")
    for route in result["routes"]:
        out += _route_detail(route, version)
    smoke = result["smoke"]
    out += ["", f"## Smoke scenario with {version}", "", f"{_MARK.get(smoke['status'], '')} {smoke['status']}: "
            f"{smoke['detail']}"]
    if smoke.get("report"):
        # The run's own report folder: report.html beside report.json is the one to read in a browser.
        html = smoke["report"][0].rsplit("/", 1)[0] + "/report.html" if "/" in smoke["report"][0] else "report.html"
        out.append(f"(report: `{smoke['report'][0]}`; to read it in a browser, open `{html}`)")
    return "\n".join(out) + "\n"


def _capabilities(result: dict[str, Any]) -> list[str]:
    pinned, candidate = result["capabilities"]["pinned"], result["capabilities"]["candidate"]
    out = ["", "## Capabilities", "", "Enabled means eligible by version and schema and proven by the live probe.",
           "", f"| capability | {result['pinned_version']} | {result['codex_version']} | why not |", "|---|---|---|---|"]
    for name, verdict in candidate["capabilities"].items():
        mine = pinned["capabilities"][name]
        why = "" if verdict["enabled"] else verdict["reason"]
        out.append(f"| {name} | {'✓' if mine['enabled'] else '✗'} | {'✓' if verdict['enabled'] else '✗'} | "
                   f"{_cell(why)} |")
    out += ["", f"The model saw the peerwire tools as `{pinned.get('tool_surface')}` with {result['pinned_version']} "
                f"and as `{candidate.get('tool_surface')}` with {result['codex_version']} (the scripted scenarios "
                f"address the first form)."]
    return out


def _route_detail(route: dict[str, Any], version: str) -> list[str]:
    if route["status"] == "skipped" or not route["outline"]:
        return []
    out = ["", f"### Route `{route['name']}` with {version}", ""]
    if route["differences"]:
        out += ["Differences from the pinned fixture:", "", "```diff", *route["differences"], "```", ""]
    out += ["```mermaid", "sequenceDiagram", "    participant P as peerwire adapter", f"    participant C as Codex {version}"]
    for line in route["outline"]:
        if line.startswith("session"):
            out.append(f"    Note over P,C: app-server {line}")
        elif line.startswith("-> "):
            out.append(f"    P->>C: {_mermaid(line[3:])}")
        else:
            out.append(f"    C-->>P: {_mermaid(line[3:])}")
    out += ["```"]
    if route["fixture"]:
        out.append(f"Recorded exchange: `{route['fixture']}`")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _mermaid(text: str) -> str:
    # Mermaid message text: no semicolons or hashes (they end or escape the statement), no line breaks.
    return re.sub(r"[;#\n]", " ", text)
