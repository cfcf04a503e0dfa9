"""``report.html``: the report as a maintainer reads it in a browser, offline.

Rendered from ``report.json`` and the report's own artifacts folder (for the
cited lines it shows inline). One self-contained file:

* a summary of every scenario run, then per run (headed by its identity):
  the checks, each with the evidence it cites shown inline and linked into
  ``artifacts/``; the sequence diagram as a picture; every message body as
  admitted; a transcript per agent of inputs, tool calls with arguments,
  outputs, errors and timing, answers, turns and model requests; the agents;
  the evidence bindings, with who made each record; the runner's own tool calls;
* every tool schema a model saw, whole; every artifact with its SHA-256; the
  secret scan.

Diagrams are SVG drawn by the report writer (:mod:`.picture`), with their
Mermaid source beside them; the page holds no script, and its
Content-Security-Policy allows none and no load of any kind, so viewing it
makes no request beyond the file itself. Evidence kinds, modes and
artifact files the page does not know are shown generically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.evidence import stored
from harness.evidence.delivery_paths import describe as describe_delivery
from harness.model.probe import mail_forms

from . import capability_table
from .excerpts import ArtifactLines, Excerpt
from .picture import STYLE as SEQUENCE_STYLE, sequence_svg
from .store import tool_list

TEXT_KINDS = ("input", "answer", "reasoning")
FOLDED_KINDS = ("context", "instructions")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                           "font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
"""Nothing from anywhere but what the page holds: no script at all, inline styles, ``data:`` images."""


def render(report: dict[str, Any], folder: Path) -> str:
    """The page for ``report`` whose artifacts are under ``folder`` (the report folder)."""
    lines = ArtifactLines(folder)
    run = report["run"]
    verdict = "PASSED" if run["passed"] else "FAILED"
    body = [_header(report), _summary(report)]
    if report["run"].get("agent_kinds"):
        body.append(capability_table.html(report["run"]["agent_kinds"]))
    body += [_scenario(s, lines) for s in report["scenarios"]]
    body += [_tool_schemas(report), _artifacts(report), _secret_scan(report["secret_scan"])]
    return "\n".join([
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{escape(verdict)} · peerwire acceptance report {escape(run['run_id'])}</title>",
        f"<style>{STYLE}{SEQUENCE_STYLE}</style>",
        "</head>",
        "<body>",
        *body,
        "</body>",
        "</html>",
    ]) + "\n"


# -- page parts ---------------------------------------------------------------------------------


def _header(report: dict[str, Any]) -> str:
    run, totals = report["run"], report["run"]["totals"]
    facts = [("Codex", run.get("codex_version")), ("provider", _provider(run.get("provider"))),
             ("started", run.get("started_at")), ("finished", run.get("finished_at"))]
    capabilities = run.get("codex_capabilities")
    if capabilities:
        facts.append(("Codex capabilities", ", ".join(capabilities["enabled"]) or "none"))
        facts += [(f"not enabled: {name}", why) for name, why in capabilities["not_enabled"].items()]
    if run.get("workspace_trust"):
        facts.append(("fixture workspace trust", run["workspace_trust"]))
    if run.get("suite"):
        facts.append(("suite", f"{run['suite']['name']} {run['suite']['version']} (scenarios sha256 "
                               f"{run['suite']['scenarios_sha256'][:12]}…)"))
    if run.get("shard"):
        shard = run["shard"]
        facts.append(("shard", f"{shard['index']} of {shard['count']} ({len(shard['cases'])} of "
                               f"{shard['plan_cases']} scenario runs; plan {shard['plan_sha256'][:12]}…)"))
    if run.get("merged_from"):
        facts.append(("merged from", ", ".join(f"shard {m['shard']} ({m['run_id']})" for m in run["merged_from"])))
    diagrams = ("Sequence diagrams are SVG drawn when the report was written (hover a step for its whole "
                "text and source); the page runs no script and loads nothing.")
    problems = "".join(f'<li class="fail">{escape(p)}</li>' for p in run.get("problems") or [])
    problems += "".join(f'<li class="muted">{escape(w)}</li>' for w in run.get("warnings") or [])
    return f"""<header>
<h1><span class="badge {_cls(run['passed'])}">{'PASSED' if run['passed'] else 'FAILED'}</span>
peerwire acceptance report <code>{escape(run['run_id'])}</code></h1>
<p class="totals">{totals['scenarios']} scenario runs ({totals['scenarios_failed']} failed) ·
{totals['checks']} checks ({totals['checks_failed']} failed{_skipped(totals)})</p>
<dl class="facts">{''.join(f'<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>' for k, v in facts if v is not None)}</dl>
{f'<ul class="problems">{problems}</ul>' if problems else ''}
<p class="note">{escape(report['counting'])} {diagrams}</p>
<nav><a href="#summary">Summary</a> · <a href="#capabilities">Agent kinds</a> · <a href="#tool-schemas">Tool schemas</a> ·
<a href="#artifacts">Artifacts</a> · <a href="#secret-scan">Secret scan</a></nav>
</header>"""


def _summary(report: dict[str, Any]) -> str:
    rows = []
    for s in report["scenarios"]:
        checks = s["checks"]
        failed = [c["id"] for c in checks if c["verdict"] == "fail"]
        skipped = [c["id"] for c in checks if c["verdict"] == "skip"]
        passed = len(checks) - len(failed) - len(skipped)
        rows.append(
            f'<tr class="{_cls(s["passed"])}"><td><a href="#{_run_id(s)}">{escape(s["identity"]["label"])}</a></td>'
            f'<td>{_badge(s["passed"])}</td><td>{passed}/{len(checks)}'
            f'{"<br><span class=fail>" + escape(", ".join(failed)) + "</span>" if failed else ""}'
            f'{"<br><span class=muted>skipped: " + escape(", ".join(skipped)) + "</span>" if skipped else ""}</td>'
            f'<td>{_seconds(s.get("wall_s"))}</td><td>{s["binding_summary"]["bound"]} bound, '
            f'{s["binding_summary"]["unbound"]} unbound</td><td>{len(s["records"])}</td></tr>')
    return (f'<section id="summary"><h2>Summary</h2><table class="summary"><thead><tr><th>scenario run</th>'
            f'<th>verdict</th><th>checks</th><th>wall time</th><th>evidence bindings</th><th>messages</th></tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table></section>')


def _scenario(s: dict[str, Any], lines: ArtifactLines) -> str:
    anchor = _run_id(s)
    identity = s["identity"]
    kinds = ", ".join(f"{name} {a.get('kind', 'codex')}" for name, a in s["agents"].items())
    facts = [("scenario", identity["scenario"]), ("mode", identity["mode"]), ("provider", identity["provider"]),
             ("agents", kinds or None),
             ("persona", identity["persona"]), ("trial", identity["trial"]), ("wall time", _seconds(s.get("wall_s"))),
             ("phases", ", ".join(f"{p['name']} {p['s']:.2f}s" for p in s["phases"]) or None),
             ("model log", s["model_log"])]
    parts = [
        f'<section class="run" id="{anchor}">',
        f'<h2>{_badge(s["passed"])} {escape(identity["label"])}</h2>',
        f'<p>{escape(s.get("description") or "")}</p>' if s.get("description") else "",
        f'<dl class="facts">{"".join(f"<dt>{k}</dt><dd>{escape(str(v))}</dd>" for k, v in facts if v is not None)}'
        f'<dt>artifacts</dt><dd><a href="{_href(s["artifacts_dir"])}">{escape(s["artifacts_dir"])}</a></dd></dl>',
        _probe(s.get("probe")),
        _checks(s, lines),
        _sequence(s),
        _messages(s),
        _transcripts(s),
        _agents(s),
        _bindings(s),
        _runner_calls(s),
        _schemas_seen(s),
        _problems(s["problems"]),
        "</section>",
    ]
    return "\n".join(p for p in parts if p)


def _checks(s: dict[str, Any], lines: ArtifactLines) -> str:
    anchor = _run_id(s)
    locations = _transcript_locations(s)
    shown: dict[str, str] = {}  # a cited line shown once per run; later citations link to it
    rows = []
    for check in s["checks"]:
        evidence = [_evidence_item(kind, ref, s, lines, locations, shown) for kind, refs in check["evidence"].items()
                    for ref in refs]
        missing = "".join(f'<li class="fail">missing: {escape(p)}</li>' for p in check["evidence_problems"])
        cited = (f'<details class="evidence"><summary>evidence ({len(evidence)})</summary><ul>{"".join(evidence)}'
                 f'{missing}</ul></details>' if evidence or missing else '<span class="muted">no evidence cited</span>')
        verdict = (f'<span class="badge muted">{escape(capability_table.verdict_text(check))}</span>'
                   if check["verdict"] == "skip" else _badge(check["verdict"] == "pass"))
        rows.append(f'<tr class="{"muted" if check["verdict"] == "skip" else _cls(check["verdict"] == "pass")}" '
                    f'id="{anchor}-check-{_id(check["id"])}">'
                    f'<td><code>{escape(check["id"])}</code></td><td>{verdict}</td>'
                    f'<td>{escape(check["summary"])} {cited}</td></tr>')
    return (f'<h3>Checks</h3><table class="checks"><thead><tr><th>check</th><th>verdict</th>'
            f'<th>summary and evidence</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _evidence_item(kind: str, ref: Any, s: dict[str, Any], lines: ArtifactLines,
                   locations: Mapping[str, str], shown: dict[str, str]) -> str:
    anchor = _run_id(s)
    if kind == "records":
        record = next((r for r in s["records"] if r["interaction_id"] == ref or r["request_id"] == ref), None)
        if record is None:
            return f"<li>record <code>{escape(str(ref))}</code> (not among the scenario's records)</li>"
        return (f'<li>record <a href="#{anchor}-msg-{_id(record["interaction_id"])}"><code>{escape(str(ref))}</code></a>'
                f' — {escape(record["kind"])} {escape(str(record["sender"]))} → {escape(str(record["recipient"]))}: '
                f'<q>{escape(_clip(record["body"], 160))}</q></li>')
    if kind == "model_requests":
        target = locations.get(f"model_request:{ref}")
        link = f'<a href="#{target}">model request {escape(str(ref))}</a>' if target else f"model request {ref}"
        return f"<li>{link} (in the transcript)</li>"
    excerpt = lines.excerpt(s["artifacts_dir"], str(ref))
    first = shown.get(excerpt.ref)
    if first is None and excerpt.text is not None:
        first = shown[excerpt.ref] = f"{anchor}-cited-{len(shown) + 1}"
        return f"<li>{escape(kind)}: {_excerpt(excerpt, locations.get(str(ref)), first)}</li>"
    return f"<li>{escape(kind)}: {_excerpt(excerpt, locations.get(str(ref)), first, again=True)}</li>"


def _excerpt(excerpt: Excerpt, transcript_anchor: str | None, anchor: str | None, *, again: bool = False) -> str:
    """A cited line: a link to its file, the line itself the first time the run cites it, and a link back to
    that first showing when cited again."""
    ref = escape(excerpt.ref)
    link = f'<a href="{_href(excerpt.path)}">{ref}</a>' if excerpt.path else f"<code>{ref}</code>"
    also = f' · <a href="#{transcript_anchor}">in the transcript</a>' if transcript_anchor else ""
    if excerpt.text is None:
        return f'{link}{also} <span class="fail">({escape(excerpt.problem or "unreadable")})</span>'
    if again:
        return f'{link}{also} · <a href="#{anchor}">the line, as cited above</a>'
    return f'{link}{also}<pre class="excerpt" id="{anchor}">{_text(excerpt.text)}</pre>'


def _sequence(s: dict[str, Any]) -> str:
    source = s["sequence_diagram"]
    picture = sequence_svg(s.get("sequence_participants") or [], s.get("sequence") or [], ident=_run_id(s), styled=False)
    return (f'<h3>Sequence</h3><div class="diagram">{picture}</div>'
            f'<details><summary>Mermaid source</summary><pre class="text">{_text(source)}</pre></details>')


def _messages(s: dict[str, Any]) -> str:
    anchor = _run_id(s)
    if not s["records"]:
        return "<h3>Messages</h3><p class=muted>No record was admitted.</p>"
    cards = []
    for r in s["records"]:
        status = r["status"] or r["code"] or ""
        cards.append(
            f'<article class="message {escape(r["kind"])}" id="{anchor}-msg-{_id(r["interaction_id"])}">'
            f'<p class="meta"><span class="kind">{escape(r["kind"])}</span> <strong>{escape(str(r["sender"]))} → '
            f'{escape(str(r["recipient"]))}</strong> <code>{escape(r["interaction_id"])}</code>'
            f'{" request <code>" + escape(r["request_id"]) + "</code>" if r["request_id"] else ""}'
            f'{" · " + escape(status) if status else ""} · state {escape(str(r["state"]))} · '
            f'{r["characters"]} characters, {r["words"]} words</p>'
            f'<p class="meta">delivery: {escape(describe_delivery(r.get("delivery") or []))}</p>'
            f'<pre class="text">{_text(r["body"])}</pre></article>')
    return "<h3>Messages (bodies exactly as admitted)</h3>" + "".join(cards)


def _transcripts(s: dict[str, Any]) -> str:
    out = ["<h3>Transcripts</h3>",
           '<p class="note">Per agent, in time order: inputs, tool calls with their arguments, outputs and errors, '
           "answers, turns and model requests. Times are seconds since the scenario's first entry; each row names "
           "the line it was read from.</p>"]
    for agent, entries in s["transcripts"].items():
        rows = "".join(_transcript_row(s, agent, e) for e in entries)
        calls = sum(e["kind"] == "tool_call" for e in entries)
        errors = sum(bool(e["error"]) for e in entries)
        out.append(f'<details class="transcript" open><summary><strong>{escape(agent)}</strong> — {len(entries)} '
                   f'entries, {calls} tool calls, {errors} errors</summary><table class="transcript"><thead><tr>'
                   f'<th>time</th><th>what</th><th>content</th><th>took</th><th>line</th></tr></thead>'
                   f'<tbody>{rows}</tbody></table></details>')
    if not s["transcripts"]:
        out.append('<p class="muted">No rollout line or model request could be attributed to an agent.</p>')
    return "".join(out)


def _transcript_row(s: dict[str, Any], agent: str, e: dict[str, Any]) -> str:
    content = []
    if e["kind"] in FOLDED_KINDS and e["text"] is not None:
        # Codex repeats these every turn; folded, with their first line as the summary.
        first = e["text"].strip().splitlines()[0] if e["text"].strip() else ""
        content.append(f'<details><summary>{escape(_clip(first, 100))}</summary>'
                       f'<pre class="text">{_text(e["text"])}</pre></details>')
    elif e["kind"] in TEXT_KINDS and e["text"] is not None:
        content.append(f'<pre class="text">{_text(e["text"])}</pre>')
    if e["kind"] == "tool_call":
        content.append(f'<div class="label">arguments</div><pre class="json">{_text(_json(e["arguments"]))}</pre>')
        if e["output"] is not None:
            content.append(f'<div class="label">output</div><pre class="text">{_text(e["output"])}</pre>')
        else:
            content.append('<p class="muted">no output recorded</p>')
    if e["kind"] == "turn_ended" and e["text"]:
        content.append(f'<div class="label">last agent message</div><pre class="text">{_text(e["text"])}</pre>')
    if e["kind"] in ("turn_started", "turn_ended", "model_request") and e["turn_id"]:
        content.append(f'<span class="muted">turn <code>{escape(e["turn_id"])}</code></span>')
    if e["error"]:
        content.append(f'<p class="error">error: {escape(e["error"])}</p>')
    source = _source_link(s, e["source"])
    if e["output_source"]:
        source += "<br>" + _source_link(s, e["output_source"])
    return (f'<tr class="entry {escape(e["kind"])}{" has-error" if e["error"] else ""}" '
            f'id="{_entry_id(s, agent, e)}"><td class="time" title="{escape(e["at"] or "")}">'
            f'{_offset(e["offset_s"])}</td><td><span class="kind">{escape(e["kind"].replace("_", " "))}</span>'
            f'<br>{escape(e["title"])}</td><td>{"".join(content)}</td><td>{_seconds(e["duration_s"])}</td>'
            f"<td>{source}</td></tr>")


def _agents(s: dict[str, Any]) -> str:
    rows = "".join(
        f'<tr><td>{escape(name)}<br><span class="muted">{escape(a.get("kind", "codex"))}</span></td>'
        f'<td><code>{escape(str(a["agent_id"]))}</code></td>'
        f'<td>{"<br>".join(f"<code>{escape(t)}</code>" for t in a["thread_ids"])}</td>'
        f'<td>{escape(", ".join(map(str, a["generations"])))}</td><td>{escape(", ".join(a["models"]) or "unverified")}'
        f'</td><td>{escape(", ".join(a["efforts"]) or "unverified")}</td>'
        f'<td>{escape(", ".join(a["codex_versions"]))}</td><td>{len(a["turns"])}</td></tr>'
        for name, a in s["agents"].items())
    return (f'<h3>Agents</h3><table><thead><tr><th>agent</th><th>agent id</th><th>threads</th><th>generations</th>'
            f'<th>model</th><th>reasoning effort</th><th>Codex</th><th>turns</th></tr></thead><tbody>{rows}</tbody>'
            f'</table><p class="note">Model and effort come from the rollouts\' turn contexts; <em>unverified</em> '
            f"means a turn did not record it.</p>")


def _bindings(s: dict[str, Any]) -> str:
    rows = []
    for b in s["bindings"]:
        where = b["call"] or b["final"]
        rows.append(
            f'<tr class="{"" if b["unbound"] is None else "unbound"}"><td><code>{escape(b["interaction_id"])}</code>'
            f'<br>{escape(b["kind"])}</td><td>{escape(b["origin"])}: {escape(b["explanation"])}</td>'
            f'<td>{escape(b["source"] or "unbound: " + str(b["unbound"]))}</td><td>{escape(b["agent"] or "")}</td>'
            f'<td><code>{escape(b["turn_id"] or "")}</code></td><td><code>{escape(b["call_id"] or "")}</code></td>'
            f'<td>{_source_link(s, where) if where else ""}</td>'
            f'<td>{escape(b["model"])} / {escape(b["effort"])}</td></tr>')
    summary = s["binding_summary"]
    return (f'<h3>Evidence bindings</h3><p>{summary["bound"]} bound, {summary["unbound"]} unbound.</p>'
            f'<table><thead><tr><th>record</th><th>made by</th><th>bound via</th><th>agent</th><th>turn</th>'
            f'<th>call</th><th>rollout</th><th>model / effort</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _runner_calls(s: dict[str, Any]) -> str:
    if not s["runner_tool_calls"]:
        return ""
    rows = "".join(
        f'<tr><td>{c["step"]}</td><td>{escape(c["agent"])}</td><td><code>{escape(c["tool"])}</code></td>'
        f'<td><pre class="json">{_text(_json(c["arguments"]))}</pre></td>'
        f'<td><pre class="json">{_text(_json(c["error"] or c["result"]))}</pre></td></tr>'
        for c in s["runner_tool_calls"])
    return ('<h3>The runner\'s own tool calls</h3><p class="note">Scenario steps that call the core directly as an '
            "agent, with no model behind them. The records they admit have no Codex call, so no rollout can bind "
            f"them.</p><table><thead><tr><th>step</th><th>as</th><th>tool</th><th>arguments</th><th>result</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>")


def _schemas_seen(s: dict[str, Any]) -> str:
    items = "".join(
        f'<li>{escape(seen["agent"])}: <code>{escape(seen["namespace"])}</code> with '
        f'{escape(", ".join(str(n) for n in seen["tool_names"]))} in model requests '
        f'{escape(", ".join(map(str, seen["requests"])))} — <a href="#schema-{seen["sha256"]}">schema '
        f'<code>{seen["sha256"]}</code></a></li>' for seen in s["tool_schemas"])
    if not items:
        items = f"<li>not recorded: {escape(s['model_log'])}</li>"
    without = s["requests_without_peerwire_tools"]
    if without:
        items += f"<li>model requests without the namespace: {escape(', '.join(map(str, without)))}</li>"
    return f"<h3>Tool schema each model saw</h3><ul>{items}</ul>"


def _probe(probe: dict[str, Any] | None) -> str:
    if probe is None:
        return ""
    legs = "".join(f'<li class="{_cls(bool(v))}"><code>{escape(k)}</code>: {"yes" if v else "no"}</li>'
                   for k, v in probe.items() if isinstance(v, bool) and k != "success")
    return (f'<h3>Collaboration probe</h3><p>{_badge(probe["success"])} {probe["requests"]} model requests, '
            f'{escape(mail_forms(probe))}.</p><ul>{legs}</ul>'
            f'<p class="note">{escape(probe["statement"])}</p>')


def _problems(problems: list[str]) -> str:
    if not problems:
        return ""
    return "<h3>Problems</h3><ul>" + "".join(f'<li class="fail">{escape(p)}</li>' for p in problems) + "</ul>"


def _tool_schemas(report: dict[str, Any]) -> str:
    seen: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for s in report["scenarios"]:
        for schema in s["tool_schemas"]:
            seen.setdefault(schema["sha256"], (schema, []))[1].append(f"{s['identity']['label']} / {schema['agent']}")
    parts = ['<section id="tool-schemas"><h2>Tool schemas</h2>',
             '<p class="note">Each distinct tool list a model was offered, whole, as the model requests carried it.</p>']
    for digest, (schema, users) in seen.items():
        tools = tool_list(report, digest)
        parts.append(f'<details id="schema-{digest}" open><summary><code>{escape(schema["namespace"])}</code> sha256 '
                     f'<code>{digest}</code> — {len(tools)} tools, seen by {escape("; ".join(users))}'
                     f'</summary><pre class="json">{_text(_json(tools))}</pre></details>')
    if not seen:
        parts.append('<p class="muted">No model request log recorded a tool list.</p>')
    return "".join(parts) + "</section>"


def _artifacts(report: dict[str, Any]) -> str:
    rows = "".join(f'<tr><td><a href="{_href(a["path"])}">{escape(a["path"])}</a></td><td>{a["bytes"]}</td>'
                   f'<td><code>{a["sha256"]}</code></td></tr>' for a in report["artifacts"])
    excluded = ("<p>Not copied: " + ", ".join(f"<code>{escape(p)}</code>" for p in report["excluded"]) + "</p>"
                if report["excluded"] else "")
    return (f'<section id="artifacts"><h2>Artifacts</h2><table class="artifacts"><thead><tr><th>file</th><th>bytes</th>'
            f'<th>SHA-256</th></tr></thead><tbody>{rows}</tbody></table>{excluded}</section>')


def _secret_scan(scan: dict[str, Any]) -> str:
    findings = "".join(f'<tr><td>{escape(f["name"])}</td><td><code>{escape(f["location"])}</code></td>'
                       f'<td>{f["occurrences"]}</td></tr>' for f in scan["findings"])
    table = (f"<table><thead><tr><th>secret</th><th>where</th><th>occurrences (redacted)</th></tr></thead>"
             f"<tbody>{findings}</tbody></table>" if findings else "<p>No secret value was found.</p>")
    return (f'<section id="secret-scan"><h2>Secret scan</h2><p>Searched for {len(scan["scanned"])} values by name: '
            f'{escape(", ".join(scan["scanned"]) or "none")}. Clean after redaction: '
            f'{_badge(scan["clean"], "yes", "NO")}</p>{table}</section>')


# -- small pieces -------------------------------------------------------------------------------


def _transcript_locations(s: dict[str, Any]) -> dict[str, str]:
    """Where each cited line or model request appears in the transcripts: ``ref -> entry anchor``."""
    out: dict[str, str] = {}
    for agent, entries in s["transcripts"].items():
        for e in entries:
            anchor = _entry_id(s, agent, e)
            for ref in (e["source"], e["output_source"]):
                if ref:
                    out.setdefault(ref, anchor)
            if e["model_request"] is not None:
                out.setdefault(f"model_request:{e['model_request']}", anchor)
    return out


def _source_link(s: dict[str, Any], ref: str) -> str:
    path, _, line = ref.rpartition(":")
    folder, _, name = path.rpartition("/")
    # Rollout names are long and alike but for their tail: the label keeps the tail and the line, the link the
    # whole file (a browser shows it on hover), so no tooltip repeats it beside each of a report's hundreds.
    short = name if len(name) <= 24 else "…" + name[-16:]
    label = f"{folder + '/' if folder else ''}{short}:{line}"
    return f'<a class="source" href="{_href(s["artifacts_dir"] + stored.stored_name(path))}">{escape(label)}</a>'


def _run_id(s: dict[str, Any]) -> str:
    return "run-" + _id(s["identity"]["slug"])


def _entry_id(s: dict[str, Any], agent: str, e: dict[str, Any]) -> str:
    return f"{_run_id(s)}-{_id(agent)}-{e['seq']}"


def _id(text: str) -> str:
    return _ID_UNSAFE.sub("_", text)


def _text(text: str) -> str:
    """``text`` as element content: only ``&``, ``<`` and ``>`` need escaping there (quotes do not, and JSON is
    full of them)."""
    return escape(text, quote=False)


def _href(path: str | None) -> str:
    # Relative links into the report folder; each segment percent-encoded, never an absolute URL.
    return escape(quote(path or "", safe="/"))


def _skipped(totals: Mapping[str, Any]) -> str:
    return f", {totals['checks_skipped']} skipped" if totals.get("checks_skipped") else ""


def _badge(passed: bool, yes: str = "pass", no: str = "FAIL") -> str:
    return f'<span class="badge {_cls(passed)}">{yes if passed else no}</span>'


def _cls(passed: bool) -> str:
    return "pass" if passed else "fail"


def _seconds(value: Any) -> str:
    return f"{value:.3f}s" if isinstance(value, (int, float)) else ""


def _offset(value: Any) -> str:
    return f"+{value:.3f}s" if isinstance(value, (int, float)) else ""


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _provider(provider: Any) -> str | None:
    if isinstance(provider, Mapping):
        return ", ".join(f"{k}={v}" for k, v in provider.items())
    return None if provider is None else str(provider)


STYLE = """
:root { --pass: #1a7f37; --fail: #cf222e; --muted: #6e7781; --line: #d0d7de; --bg: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1280px; padding: 16px 24px 64px; color: #1f2328; }
h1 { font-size: 22px; margin: 8px 0; } h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 1px solid var(--line);
padding-bottom: 4px; } h3 { font-size: 16px; margin: 20px 0 6px; }
code, pre { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px; margin: 4px 0;
      white-space: pre-wrap; word-break: break-word; max-height: 28em; overflow: auto; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: var(--bg); font-weight: 600; }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
.badge { display: inline-block; border-radius: 999px; padding: 1px 10px; font-size: 12px; font-weight: 700;
         color: #fff; vertical-align: middle; }
tr.fail > td:first-child { border-left: 4px solid var(--fail); } .fail { color: var(--fail); }
.badge.pass { background: var(--pass); color: #fff; } .badge.fail { background: var(--fail); color: #fff; }
li.pass { color: var(--pass); } .muted, .note { color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 8px 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
header nav { margin-top: 8px; } section.run { margin-top: 36px; }
.diagram { border: 1px solid var(--line); border-radius: 6px; padding: 8px; overflow-x: auto; background: #fff; }
details.evidence > summary { cursor: pointer; color: var(--accent); margin-top: 4px; }
details.evidence ul { padding-left: 18px; } pre.excerpt { max-height: 18em; }
article.message { border: 1px solid var(--line); border-left: 4px solid var(--accent); border-radius: 6px;
                  padding: 4px 10px; margin: 8px 0; }
article.message.task { border-left-color: #8250df; } article.message.reply { border-left-color: var(--pass); }
article.message.notice { border-left-color: #bf8700; } article.message .meta { margin: 4px 0; }
.kind { display: inline-block; font-size: 11px; text-transform: uppercase; letter-spacing: .04em;
        color: var(--muted); }
table.transcript td.time { white-space: nowrap; color: var(--muted); }
table.transcript tr.tool_call td:nth-child(2) { border-left: 3px solid #8250df; }
table.transcript tr.answer td:nth-child(2) { border-left: 3px solid var(--pass); }
table.transcript tr.input td:nth-child(2) { border-left: 3px solid var(--accent); }
table.transcript tr.model_request { background: #fbfbfc; }
table.transcript tr.context, table.transcript tr.instructions { color: var(--muted); }
tr.has-error td { background: #fff5f5; } p.error { color: var(--fail); font-weight: 600; margin: 4px 0; }
.label { font-size: 11px; color: var(--muted); text-transform: uppercase; margin-top: 4px; }
a.source { font-size: 12px; white-space: nowrap; }
tr.unbound td { background: #fffbea; }
"""
