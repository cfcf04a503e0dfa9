"""The compliance report: ``compliance.json`` for machines, ``compliance.md`` for people.

Both list every requirement of the manifest with its level, profile, source and
result (pass, fail, not tested, expected failure, not applicable), the score per
level overall, per profile and per source (JSON-RPC 2.0, each MCP revision, the
messaging contract, each with its own verdict), why the run passed or failed,
and for every failure the rule it breaks (its source, and for a JSON-RPC or MCP
rule the spec's sentence), the failing step with its request and response, and
every line exchanged around it whatever its id.
"""

from __future__ import annotations

import hashlib
import json
import os
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from .compliance import Compliance, Result
from .layout import CONTRACTS_DIR
from .manifest import NEEDS, Level
from .verdicts import clip, exchange_lines

SUITE_NAME = "peerwire messaging contract v1"
JSON_NAME = "compliance.json"
MARKDOWN_NAME = "compliance.md"
JUNIT_NAME = "junit.xml"


def suite_version() -> str:
    """peerwire's version and a digest of the manifest, cases and tool schemas: shards of one run share it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in CONTRACTS_DIR.rglob("*") if p.is_file() and p.suffix in (".json", ".toml")):
        digest.update(path.relative_to(CONTRACTS_DIR).as_posix().encode("utf-8") + b"\0" + path.read_bytes())
    return f"{metadata.version('peerwire')}+{digest.hexdigest()[:16]}"


def compliance_document(compliance: Compliance, *, target: dict[str, Any], tests: dict[str, int],
                        extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The content of ``compliance.json``; ``extra`` adds top-level keys (a shard's plan and votes, a merge)."""
    return {
        "suite": SUITE_NAME,
        "suite_version": suite_version(),
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": target,
        "selection": compliance.selection.to_json(),
        "baseline": {
            "path": compliance.baseline.path,
            "entries": [{"key": e.key, "comment": e.comment} for e in compliance.baseline],
        },
        "verdict": {
            "compliant": compliance.ok,
            "state": compliance.state,
            "interrupted_by": compliance.interrupted_by,
            "exit_status": compliance.final_status,
            "problems": list(compliance.problems),
            "warnings": list(compliance.warnings),
            "ran": {level.name: {"ran": ran, "of": total} for level, (ran, total) in compliance.coverage().items()},
        },
        "scores": _scores_json(compliance.scores),
        "scored_profiles": list(compliance.selection.profiles),
        "sources": {
            group: {"conformant": compliance.source_verdicts().get(group, False),
                    "verdict": compliance.source_verdict(group), **_scores_json(scores)}
            for group, scores in (compliance.source_scores or {}).items()
        },
        "reference_only": [v.requirement.id for v in compliance.reference_only],
        "profile_scores": {
            profile: {"selected": profile in compliance.selection.profiles, **_scores_json(scores)}
            for profile, scores in compliance.profile_scores.items()
        },
        "tests": tests,
        "requirements": [
            {
                "id": v.requirement.id,
                "level": v.requirement.level.name,
                "profile": v.requirement.profile,
                "source": v.requirement.source,
                "origin": v.requirement.origin.value,
                "source_group": v.requirement.source_group,
                **({"keyword": v.requirement.keyword} if v.requirement.keyword else {}),
                **({"quote": v.requirement.quote} if v.requirement.quote else {}),
                **({"revisions": list(v.requirement.revisions)} if v.requirement.revisions else {}),
                **({"needs": list(v.requirement.needs)} if v.requirement.needs else {}),
                **({"lacks": list(compliance.selection.lacks(v.requirement))}
                   if compliance.selection.lacks(v.requirement) else {}),
                "citation": v.requirement.citation(),
                "behaviour": v.requirement.behaviour,
                "result": v.result.value,
                "selected": v.selected,
                **({"deferred": v.requirement.deferred} if v.requirement.deferred else {}),
                **({"verified_by": v.requirement.verified_by} if v.requirement.verified_by else {}),
                **({"divergence": v.requirement.divergence} if v.requirement.divergence else {}),
                **({"baselined": v.baselined} if v.baselined else {}),
                **({"stale": True} if v.stale else {}),
                **({"blocked_by": list(v.blocked_by)} if v.blocked_by else {}),
                "passed_checks": v.passes,
                **({"notes": list(v.notes)} if v.notes else {}),
                "items": list(v.items),
                "failures": [f.to_json() for f in v.failures],
            }
            for v in compliance.verdicts
        ],
        **(extra or {}),
    }


def _ran_line(ran: dict[str, dict[str, int]]) -> list[str]:
    """For a run that left out some of its profiles' requirements: how many of each level ran."""
    if all(counts["ran"] == counts["of"] for counts in ran.values()):
        return []
    return ["- Judged over what ran only: " + ", ".join(f"{c['ran']} of {c['of']} {level}s"
                                                       for level, c in ran.items() if c["of"])]


def _scores_json(scores: dict) -> dict[str, Any]:
    return {level.name: {"pass": s.passed, "fail": s.failed, "expected_failure": s.expected_failures,
                         "not_tested": s.not_tested, "blocked": s.blocked, "total": s.total, "score": round(s.score, 4)}
            for level, s in scores.items()}


def write_reports(directory: Path, compliance: Compliance, *, target: dict[str, Any],
                  tests: dict[str, int], extra: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Write ``compliance.json`` and ``compliance.md`` into ``directory`` (created 0700)."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    document = compliance_document(compliance, target=target, tests=tests, extra=extra)
    json_path = directory / JSON_NAME
    json_path.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", "utf-8")
    md_path = directory / MARKDOWN_NAME
    md_path.write_text(render_markdown(document), "utf-8")
    return json_path, md_path


def render_markdown(document: dict[str, Any]) -> str:
    """``compliance.md`` from the JSON document (one source for both)."""
    verdict = document["verdict"]
    target = document["target"]
    lines = [
        "# Contract compliance",
        "",
        f"- Suite: {document['suite']} ({document.get('suite_version')})",
        *_shard_lines(document),
        f"- Generated: {document['generated_at']}",
        f"- Server command: `{' '.join(target.get('server_cmd', []))}`",
        "- Collab server command: " + (f"`{' '.join(target['collab_server_cmd'])}`" if target.get("collab_server_cmd")
                                       else "none (the collab profile is not offered)"),
        "- Provisioner: " + (f"`{target['provisioner']}`" if target.get("provisioner")
                             else "none (the protocol profile alone)"),
        f"- Selection: level {document['selection']['level']}"
        + (f", profiles {', '.join(document['selection']['profiles'])}" if 'profiles' in document['selection']
           else "")
        + (f", requirements {', '.join(document['selection']['patterns'])}" if document['selection']['patterns']
           else ""),
        f"- Baseline: {document['baseline']['path'] or 'none'} ({len(document['baseline']['entries'])} entries)",
        f"- Verdict: **{verdict.get('state') or ('compliant' if verdict['compliant'] else 'not compliant')}** "
        f"(exit status {verdict['exit_status']})",
        *_ran_line(verdict.get("ran") or {}),
    ]
    # Why first: a reader opens the file to learn whether and why the run fails.
    if verdict["problems"] or verdict["warnings"]:
        heading = "## Why the run stopped" if verdict.get("interrupted_by") else "## Why the run fails"
        lines += ["", heading if verdict["problems"] else "## Warnings", ""]
        lines += [f"- {_cell(p)}" for p in verdict["problems"]]
        lines += [f"- warning: {_cell(w)}" for w in verdict["warnings"]]
    lines += [
        "",
        "## Scores",
        "",
        f"Over the selected profiles ({', '.join(document.get('scored_profiles', []))}); not tested counts against "
        "the score. " + not_tested_summary(document["requirements"]),
        "",
        "| Level | Pass | Fail | Expected failure | Not tested | Total | Score |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for level in Level:
        s = document["scores"][level.name]
        lines.append(f"| {level.name} | {s['pass']} | {s['fail']} | {s['expected_failure']} | {s['not_tested']} "
                     f"| {s['total']} | {s['score'] * 100:.1f}% |")
    profile_scores = document.get("profile_scores") or {}
    if profile_scores:
        lines += ["", "By tool profile (a profile not selected is not tested):", "",
                  "| Profile | Level | Pass | Fail | Expected failure | Not tested | Total | Score |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for profile, scores in profile_scores.items():
            if not scores["selected"]:
                continue  # folded under the requirements not selected, below
            label = profile
            for level in Level:
                s = scores[level.name]
                if s["total"]:
                    lines.append(f"| {label} | {level.name} | {s['pass']} | {s['fail']} | {s['expected_failure']} "
                                 f"| {s['not_tested']} | {s['total']} | {s['score'] * 100:.1f}% |")
    sources = document.get("sources") or {}
    if sources:
        lines += ["", "## By source", "",
                  "Whose rule each requirement states: JSON-RPC 2.0's, an MCP revision's (its level is the spec's "
                  "keyword), or the messaging contract's own stricter rules. A server can conform to JSON-RPC 2.0 and "
                  "MCP and not to the contract.", "",
                  "| Source | Verdict | MUST | SHOULD | MAY |", "|---|---|---|---|---|"]
        for group, scores in sources.items():
            cells = [f"{scores[lv.name]['pass']}/{scores[lv.name]['total']} pass"
                     + (f", {scores[lv.name]['fail']} fail" if scores[lv.name]["fail"] else "")
                     + (f", {scores[lv.name]['not_tested']} not tested" if scores[lv.name]["not_tested"] else "")
                     if scores[lv.name]["total"] else "-" for lv in Level]
            verdict_text = scores.get("verdict") or ("conformant" if scores["conformant"] else "NOT conformant")
            verdict_text = f"**{verdict_text}**" if verdict_text == "NOT conformant" else verdict_text
            lines.append(f"| {group} | {verdict_text} | " + " | ".join(cells) + " |")
    inapplicable = [r for r in document["requirements"] if r["result"] == Result.NOT_APPLICABLE.value]
    if inapplicable:
        lines += ["", "Not applicable to this target (not scored): "
                  + "; ".join(f"`{r['id']}` ({_cell(_why_inapplicable(r))})" for r in inapplicable) + "."]
    blocked = [r for r in document["requirements"] if r["result"] == Result.BLOCKED.value]
    if blocked:
        lines += ["", f"## {blocked_summary(document['requirements'])}", "",
                  "Their tests stopped at failures the baseline expects, before they could judge them; they are left "
                  "out of the exit status and count against the score.", "",
                  "| ID | Level | Blocked by |", "|---|---|---|"]
        lines += [f"| `{r['id']}` | {r['level']} | " + ", ".join(f"`{b}`" for b in r["blocked_by"]) + " |"
                  for r in blocked]
    apart = [r for r in document["requirements"] if r["result"] == Result.REFERENCE_ONLY.value]
    failing = [r for r in document["requirements"] if r["failures"]]
    if failing:
        lines += ["", "## Failures", ""]
        for req in failing:
            lines += [f"### `{req['id']}` ({req['level']}): {req['result']}", "", req["behaviour"], "",
                      f"Rule: {_cell(req.get('citation', req['source']))}", ""]
            for failure in req["failures"]:
                where = failure.get("case") or failure.get("item", "")
                step = f", step `{failure['step']}`" if failure.get("step") else ""
                lines.append(f"- `{where}`{step}: expected {failure['check']}")
                if failure.get("detail"):
                    lines.append(f"  - found: {_cell(failure['detail'])}")
                for part in ("request", "response"):
                    if part in failure:
                        body = json.dumps(clip(failure[part], 600), ensure_ascii=False, indent=2)
                        lines += [f"  - {part}:", "", "    ```json"]
                        lines += [f"    {ln}" for ln in body.splitlines()]
                        lines += ["    ```", ""]
                if failure.get("exchange"):
                    lines += ["  - every line exchanged around it, whatever its id (-> sent, <- received):", "",
                              "    ```"]
                    lines += [f"    {ln}" for ln in exchange_lines(failure["exchange"])]
                    lines += ["    ```", ""]
    selected = [r for r in document["requirements"] if r["selected"]]
    unselected = [r for r in document["requirements"] if not r["selected"] and r["result"] != Result.REFERENCE_ONLY.value]
    lines += ["", f"## Requirements selected ({len(selected)})", ""]
    lines += _requirement_rows(selected)
    # What the run did not judge is kept, folded: the reference-only rules, other profiles, unselected rows.
    unselected_profiles = {p: sc for p, sc in profile_scores.items() if not sc["selected"]}
    if apart or unselected or unselected_profiles:
        lines += ["", "<details><summary>Not judged by this run: "
                  f"{len(apart)} verified by the reference only, {len(unselected)} not selected</summary>", ""]
        if apart:
            lines += [f"### Verified by the reference only ({len(apart)})", "",
                      "What no tool result shows (a provider turn, the text a model reads): the reference proves "
                      "these in its own tests. They are not counted in any score, for any implementation.", "",
                      "| ID | Level | Verified by |", "|---|---|---|"]
            lines += [f"| `{r['id']}` | {r['level']} | {_cell(r.get('verified_by', ''))} |" for r in apart]
            lines.append("")
        if unselected_profiles:
            lines += ["### Profiles not selected", "", "| Profile | Level | Not tested | Total |", "|---|---|---:|---:|"]
            lines += [f"| {profile} | {level.name} | {sc[level.name]['not_tested']} | {sc[level.name]['total']} |"
                      for profile, sc in unselected_profiles.items() for level in Level if sc[level.name]["total"]]
            lines.append("")
        if unselected:
            lines += [f"### Requirements not selected ({len(unselected)})", ""]
            lines += _requirement_rows(unselected)
            lines.append("")
        lines.append("</details>")
    tests = document.get("tests") or {}
    if tests:
        lines += ["", "## Test items", "", ", ".join(f"{k}: {v}" for k, v in sorted(tests.items()))]
    return "\n".join(lines) + "\n"


def _requirement_rows(requirements: list[dict[str, Any]]) -> list[str]:
    lines = ["| ID | Level | Result | Source | Notes |", "|---|---|---|---|---|"]
    for req in requirements:
        notes = []
        if req.get("lacks"):
            notes.append("not selected: needs " + ", ".join(NEEDS.get(n, n) for n in req["lacks"]))
        elif not req["selected"] and not req.get("deferred") and not req.get("verified_by"):
            notes.append("not selected")
        if req.get("deferred"):
            notes.append(f"deferred: {req['deferred']}")
        if req.get("verified_by"):
            notes.append("verified by the reference only")
        if req.get("divergence"):
            notes.append(f"divergence: {req['divergence']}")
        if req.get("baselined"):
            notes.append(f"baselined: {req['baselined']}")
        if req.get("stale"):
            notes.append("STALE baseline entry")
        notes += req.get("notes", [])
        result = req["result"] if req["result"] != Result.FAIL.value else "**fail**"
        lines.append(f"| `{req['id']}` | {req['level']} | {result} | {_cell(req['source'])} "
                     f"| {_cell('; '.join(notes))} |")
    return lines


def _shard_lines(document: dict[str, Any]) -> list[str]:
    lines = []
    shard = document.get("shard")
    if shard:
        lines.append(f"- Shard {shard['index']} of {shard['count']}: {len(shard['cases'])} of {shard['plan_cases']} "
                     "tests. This verdict covers only them: a MUST fails the shard, but what is not tested here is "
                     "judged when the shards are merged (`peerwire-harness report merge`)")
    merge = document.get("merge")
    if merge:
        lines.append(f"- Merged from {len(merge['shards'])} shards: "
                     + ", ".join(f"{m['index']}/{m['count']} ({m['cases']} tests)" for m in merge["shards"]))
        lines += [f"- Merge problem: {_cell(p)}" for p in merge["problems"]]
        lines += [f"- Merged despite: {_cell(w)}" for w in merge["warnings"]]
    return lines


def not_tested_summary(requirements: list[dict[str, Any]]) -> str:
    """Why requirements went untested: deferred, left out of the selection, or selected without a vote."""
    untested = [r for r in requirements if r["result"] == Result.NOT_TESTED.value]
    deferred = sum(1 for r in untested if r.get("deferred"))
    unselected = sum(1 for r in untested if not r["selected"] and not r.get("deferred"))
    return (f"Not tested: {len(untested)} ({deferred} deferred, {unselected} not selected, "
            f"{len(untested) - deferred - unselected} selected but without a vote).")


def blocked_summary(requirements: list[dict[str, Any]]) -> str:
    """How many requirements the baseline's expected failures kept from being judged (empty when none)."""
    blocked = sum(1 for r in requirements if r["result"] == Result.BLOCKED.value)
    return f"{blocked} blocked by baselined prerequisites" if blocked else ""


def group_junit_by_source(path: Path, manifest: Any) -> None:
    """Regroup ``junit.xml``'s test cases into one ``<testsuite>`` per source (JSON-RPC 2.0, MCP <revision>,
    messaging contract), each case carrying its rule's citation as properties ``source_group`` and ``rule``,
    so CI shows which spec a failure breaks. A file without contract cases is left as it is."""
    if not path.is_file():
        return
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return
    groups: dict[str, list[ET.Element]] = {}
    for case in list(root.iter("testcase")):
        info = next((p.get("value") for p in case.iter("property") if p.get("name") == "contract_item"), None)
        try:
            requirement = manifest[json.loads(info)["requirement"]] if info else None
        except (ValueError, KeyError):
            requirement = None
        group = requirement.source_group if requirement is not None else "other"
        if requirement is not None:
            properties = case.find("properties")
            if properties is None:
                properties = ET.SubElement(case, "properties")
            ET.SubElement(properties, "property", name="source_group", value=group)
            ET.SubElement(properties, "property", name="rule", value=requirement.citation())
        groups.setdefault(group, []).append(case)
    if not groups or set(groups) == {"other"}:
        return
    out = ET.Element("testsuites", name="peerwire contract suite")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for group, cases in sorted(groups.items()):
        suite = ET.SubElement(out, "testsuite", name=f"contract: {group}")
        counts = {"tests": len(cases), "failures": sum(c.find("failure") is not None for c in cases),
                  "errors": sum(c.find("error") is not None for c in cases),
                  "skipped": sum(c.find("skipped") is not None for c in cases)}
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.extend(cases)
    for key, value in totals.items():
        out.set(key, str(value))
    path.write_text('<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(out, encoding="unicode") + "\n",
                    encoding="utf-8")


def _why_inapplicable(requirement: dict[str, Any]) -> str:
    revisions = requirement.get("revisions")
    return f"the rule is that of MCP {', '.join(revisions)}" if revisions else "see compliance.json"


def reference_only_summary(document: dict[str, Any], where: str = "compliance.md") -> str:
    """One line for the terminal: how many requirements only the reference's own tests verify, and where the
    list is (printing every id on every run told nobody anything)."""
    count = len(document.get("reference_only") or [])
    return (f"verified by the reference only, not counted: {count} requirements (a provider turn, the text a model "
            f"reads); listed under 'Verified by the reference only' in {where}")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
