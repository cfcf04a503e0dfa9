"""``report.md``: the human-readable face of ``report.json`` (rendered from it alone)."""

from __future__ import annotations

import json
import re
from typing import Any

from harness.evidence.delivery_paths import describe as describe_delivery
from harness.model.probe import mail_forms

from . import capability_table
from .store import tool_list

_BACKTICKS = re.compile(r"`+")


def _result(run: dict[str, Any]) -> str:
    if run.get("interrupted"):
        return f"INTERRUPTED by {run['interrupted']['signal']}"
    return "PASSED" if run["passed"] else "FAILED"


def _interrupted(interrupted: dict[str, Any] | None) -> list[str]:
    if not interrupted:
        return []
    return [f"- Interrupted by {interrupted['signal']}: {len(interrupted['finished'])} scenario runs finished"
            + (f" ({', '.join(interrupted['finished'])})" if interrupted["finished"] else "")
            + f"; {len(interrupted['unfinished'])} did not"
            + (f" ({', '.join(interrupted['unfinished'])})" if interrupted["unfinished"] else "")]


def render(report: dict[str, Any]) -> str:
    """Markdown for a validated report dict. Texts are shown verbatim inside fences."""
    run = report["run"]
    totals = run["totals"]
    out = [
        f"# peerwire acceptance report {run['run_id']}",
        "",
        f"- Result: **{_result(run)}** — {totals['scenarios']} scenarios "
        f"({totals['scenarios_failed']} failed), {totals['checks']} checks ({totals['checks_failed']} failed"
        + (f", {totals['checks_skipped']} skipped" if totals.get("checks_skipped") else "") + ")",
        *_interrupted(run.get("interrupted")),
        f"- Started {run['started_at']}, finished {run['finished_at']}",
        f"- Codex version: {run['codex_version']}; provider: {_provider(run['provider'])}",
        *_capabilities(run.get("codex_capabilities")),
        *_shards(run),
        *_run_usage(run),
        *([f"- Fixture workspace trust: {run['workspace_trust']}"] if run.get("workspace_trust") else []),
        f"- {report['counting']}",
        "",
    ]
    if run.get("agent_kinds"):
        out += ["## Agent kinds and their capabilities", "", *capability_table.markdown(run["agent_kinds"]), "",
                "A check that needs a capability or trace an agent lacks is skipped for it, naming what it lacks; "
                "a skip is never counted as a pass.", ""]
    for scenario in report["scenarios"]:
        out.extend(_scenario(scenario))
    out.extend(_tool_schemas(report))
    out.extend(_artifacts(report))
    out.extend(_secret_scan(report["secret_scan"]))
    return "\n".join(out) + "\n"


def _capabilities(capabilities: dict[str, Any] | None) -> list[str]:
    if not capabilities:
        return []
    missing = "; ".join(f"{name}: {why}" for name, why in capabilities["not_enabled"].items())
    return [f"- Codex capabilities (live probe, artifacts/capabilities/): {', '.join(capabilities['enabled']) or 'none'}"
            + (f" — not enabled: {missing}" if missing else "")]


def _shards(run: dict[str, Any]) -> list[str]:
    out = []
    if run.get("suite"):
        out.append(f"- Suite: {run['suite']['name']} {run['suite']['version']}, scenarios sha256 "
                   f"`{run['suite']['scenarios_sha256']}`")
    shard = run.get("shard")
    if shard:
        out.append(f"- Shard {shard['index']} of {shard['count']}: {len(shard['cases'])} of {shard['plan_cases']} "
                   f"scenario runs (plan `{shard['plan_sha256'][:16]}…`); merge the shards with "
                   "`runner.py report merge`")
    if run.get("merged_from"):
        out.append("- Merged from " + ", ".join(f"shard {m['shard']} (run `{m['run_id']}`, "
                                                 f"{'passed' if m['passed'] else 'FAILED'})" for m in run["merged_from"]))
    out += [f"- **Merge problem:** {_cell(p)}" for p in run.get("problems") or []]
    out += [f"- Merge warning: {_cell(w)}" for w in run.get("warnings") or []]
    return out


def _provider(provider: Any) -> str:
    if isinstance(provider, dict):
        return ", ".join(f"{k}={v}" for k, v in provider.items())
    return str(provider)


def _scenario(s: dict[str, Any]) -> list[str]:
    out = [f"## Scenario `{s['identity']['label']}` — {'pass' if s['passed'] else 'FAIL'}", ""]
    if s.get("description"):
        out += [s["description"], ""]
    phases = ", ".join(f"{p['name']} {p['s']:.2f}s" for p in s["phases"])
    wall = f"{s['wall_s']:.2f}s" if isinstance(s.get("wall_s"), (int, float)) else "n/a"
    out += [f"Mode: {s.get('mode')}; wall time {wall}" + (f" ({phases})" if phases else ""),
            f"Artifacts: `{s['artifacts_dir']}`", ""]
    if s.get("probe") is not None:
        out += _probe(s["probe"])
    out += ["### Checks", "", "| check | verdict | summary | evidence |", "|---|---|---|---|"]
    for check in s["checks"]:
        evidence = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in check["evidence"].items() if v)
        if check["evidence_problems"]:
            evidence += " — **missing:** " + "; ".join(check["evidence_problems"])
        content = check.get("content")
        summary = check["summary"] + (f" — content ({content['label']}): {content['grade']}" if content else "")
        verdict = capability_table.verdict_text(check)
        out.append(f"| `{check['id']}` | {verdict if check['verdict'] != 'fail' else '**FAIL**'} | "
                   f"{_cell(summary)} | {_cell(evidence)} |")
    if s.get("usage") is not None:
        out += _usage(s["usage"])
    out += ["", "### Agents", "", "| agent | kind | agent id | threads | model | reasoning effort | Codex |",
            "|---|---|---|---|---|---|---|"]
    for name, agent in s["agents"].items():
        out.append(f"| {name} | {agent.get('kind', 'codex')} | `{agent['agent_id']}` | {', '.join(f'`{t}`' for t in agent['thread_ids'])} | "
                   f"{', '.join(agent['models']) or 'unverified'} | {', '.join(agent['efforts']) or 'unverified'} | "
                   f"{', '.join(agent['codex_versions'])} |")
    out += ["", "Model and effort come from the rollouts' turn contexts; `unverified` means a turn did not "
            "record it.", ""]
    out += ["### Inputs (exact)", ""]
    for item in s["inputs"]:
        out += _text_block(f"{item['agent']} prompt {item['index'] + 1}", item)
    out += ["### Visible outputs", ""]
    for item in s["outputs"]:
        out += _text_block(f"{item['agent']} output {item['index'] + 1}", item)
    out += ["### Records", "", "| record | kind | from → to | request | status | delivery | characters | words |",
            "|---|---|---|---|---|---|---|---|"]
    for r in s["records"]:
        out.append(f"| `{r['interaction_id']}` | {r['kind']} | {r['sender']} → {r['recipient']} | "
                   f"{r['request_id'] or ''} | {r['status'] or r['code'] or r['state'] or ''} | "
                   f"{_cell(describe_delivery(r.get('delivery') or []))} | {r['characters']} | {r['words']} |")
    out += _messages(s["records"])
    out += _runner_tool_calls(s["runner_tool_calls"])
    out += ["### Evidence bindings", "",
            f"{s['binding_summary']['bound']} bound, {s['binding_summary']['unbound']} unbound.", "",
            "| record | made by | via | agent | turn | call | rollout | model / effort |",
            "|---|---|---|---|---|---|---|---|"]
    for b in s["bindings"]:
        via = b["source"] or f"**unbound**: {b['unbound']}"
        where = b["call"] or b["final"] or ""
        out.append(f"| `{b['interaction_id']}` | {_cell(b['explanation'])} | {_cell(via)} | {b['agent'] or ''} | "
                   f"`{b['turn_id'] or ''}` | `{b['call_id'] or ''}` | {_cell(where)} | {b['model']} / {b['effort']} |")
    out += ["", "### Tool schema each model saw", ""]
    for seen in s["tool_schemas"]:
        out.append(f"- {seen['agent']}: `{seen['namespace']}` with {', '.join(seen['tool_names'])} "
                   f"(requests {', '.join(map(str, seen['requests']))}): schema sha256 `{seen['sha256']}`, "
                   "kept whole once in report.json (`store.tool_lists`)")
    if not s["tool_schemas"]:
        out.append(f"- not recorded: {s['model_log']}")
    if s["requests_without_peerwire_tools"]:
        out.append(f"- requests without the namespace: {', '.join(map(str, s['requests_without_peerwire_tools']))}")
    out += ["", "### Sequence", "", "```mermaid", s["sequence_diagram"].rstrip("\n"), "```", ""]
    if s["problems"]:
        out += ["### Problems", ""] + [f"- {_cell(p)}" for p in s["problems"]] + [""]
    return out


def _messages(records: list[dict[str, Any]]) -> list[str]:
    """Every record's body as it was admitted: what each model (or peerwire) actually wrote."""
    out = ["", "### Messages (bodies exactly as admitted)", ""]
    if not records:
        return out + ["No record was admitted.", ""]
    for r in records:
        title = (f"{r['kind']} `{r['interaction_id']}` {r['sender']} → {r['recipient']}"
                 + (f", request `{r['request_id']}`" if r["request_id"] else "")
                 + (f", {r['status'] or r['code']}" if r["status"] or r["code"] else ""))
        out += [f"**{title}** — {r['characters']} characters, {r['words']} words", "", *_fenced(r["body"]), ""]
    return out


def _runner_tool_calls(calls: list[dict[str, Any]]) -> list[str]:
    if not calls:
        return []
    out = ["### The runner's own tool calls", "",
           "Scenario steps that call the core directly as an agent, with no model behind them; the records they "
           "admit have no Codex call, which is why they stay unbound below.", "",
           "| step | as | tool | arguments | result |", "|---|---|---|---|---|"]
    for call in calls:
        result = call["error"] or call["result"] or {}
        out.append(f"| {call['step']} | {call['agent']} | `{call['tool']}` | "
                   f"`{_cell(json.dumps(call['arguments'], ensure_ascii=False))}` | "
                   f"`{_cell(json.dumps(result, ensure_ascii=False))}` |")
    return out + [""]


def _tool_schemas(report: dict[str, Any]) -> list[str]:
    """Each distinct tool list any model was offered, whole, once (scenarios name it by its sha256)."""
    seen: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for s in report["scenarios"]:
        for schema in s["tool_schemas"]:
            entry = seen.setdefault(schema["sha256"], (schema, []))
            entry[1].append(f"{s['identity']['label']} / {schema['agent']}")
    if not seen:
        return []
    out = ["## Tool schemas", "", "Each distinct tool list is kept whole once, in report.json (`store.tool_lists`, "
           "by its sha256) and shown in report.html (Tool schemas).", ""]
    for digest, (schema, users) in seen.items():
        names = ", ".join(f"`{tool.get('name')}`" for tool in tool_list(report, digest) if isinstance(tool, dict))
        out += [f"### `{schema['namespace']}` sha256 `{digest}`", "", f"Tools: {names}", "",
                "Seen by: " + "; ".join(users), ""]
    return out


def _probe(probe: dict[str, Any]) -> list[str]:
    legs = ("childQuestionObserved", "parentReplyObserved", "childFinalObserved", "finalExact")
    out = ["### Collaboration probe", "",
           f"Result: **{'success' if probe['success'] else 'FAILED'}** — {probe['requests']} model requests, "
           f"{mail_forms(probe)}.", "",
           "| leg | observed |", "|---|---|"]
    out += [f"| `{leg}` | {'yes' if probe[leg] else '**no**'} |" for leg in legs]
    return out + ["", probe["statement"], ""]


def _text_block(title: str, item: dict[str, Any]) -> list[str]:
    where = ", ".join(item["rollout"]) or "not found in the rollouts"
    return [f"**{title}** — {item['characters']} characters, {item['words']} words; rollout: {where}", "",
            *_fenced(item["text"]), ""]


def _fenced(text: str, language: str = "text") -> list[str]:
    # A fence longer than any run of backticks in the text, so the text cannot close it.
    fence = "`" * max(3, 1 + max((len(m) for m in _BACKTICKS.findall(text)), default=0))
    return [fence + language, text, fence]


def _artifacts(report: dict[str, Any]) -> list[str]:
    artifacts = report["artifacts"]
    out = ["## Artifacts", "",
           f"{len(artifacts)} files, {sum(a['bytes'] for a in artifacts)} bytes in all, under `artifacts/`; each is "
           "listed with its size and SHA-256 once, in report.json (`artifacts`), and linked from report.html "
           "(Artifacts)."]
    if report["excluded"]:
        out += ["", "Not copied: " + ", ".join(f"`{p}`" for p in report["excluded"])]
    return out + [""]


def _secret_scan(scan: dict[str, Any]) -> list[str]:
    out = ["## Secret scan", "",
           f"Searched for {len(scan['scanned'])} values by name: {', '.join(scan['scanned']) or 'none'}.",
           f"Clean after redaction: {'yes' if scan['clean'] else '**no**'}.", ""]
    if scan["findings"]:
        out += ["| secret | where | occurrences (redacted) |", "|---|---|---|"]
        out += [f"| {f['name']} | `{f['location']}` | {f['occurrences']} |" for f in scan["findings"]]
    else:
        out.append("No secret value was found.")
    return out + [""]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _usage(usage: dict) -> list[str]:
    """Per agent the model requests and token counts (as Codex recorded them), the model and effort."""
    out = ["", "### Model usage", "", f"_{usage['label']}_", "",
           "| agent | model requests | input tokens | cached input tokens | output tokens | reasoning output tokens "
           "| model | reasoning effort |", "|---|---|---|---|---|---|---|---|"]
    rows = [*usage["agents"].items(), ("total", {**usage["totals"], "models": [], "reasoning_efforts": []})]
    for name, entry in rows:
        out.append(f"| {name} | {entry['model_requests']} | {entry['input_tokens']} | {entry['cached_input_tokens']} | "
                   f"{entry['output_tokens']} | {entry['reasoning_output_tokens']} | {', '.join(entry['models'])} | "
                   f"{', '.join(entry['reasoning_efforts'])} |")
    return out


def _run_usage(run: dict[str, Any]) -> list[str]:
    """The run's request and token totals, the cap, and the pass rates over trials."""
    out = []
    usage = run.get("usage")
    if usage:
        t = usage["totals"]
        cap = f"; cap {usage['max_requests']} model requests per agent per scenario run" \
            if usage.get("max_requests") else ""
        out.append(f"- Model usage ({usage['label']}): {t['model_requests']} model requests, {t['input_tokens']} input "
                   f"tokens ({t['cached_input_tokens']} cached), {t['output_tokens']} output tokens "
                   f"({t['reasoning_output_tokens']} reasoning){cap}")
    trials = run.get("trials")
    if trials:
        out.append(f"- Trials: {trials['count']} per scenario run; minimum pass rate {trials['min_pass_rate']:.0%} "
                   f"{'met' if trials['met'] else '**not met**'}")
        out += [f"  - {rate['label']}: {rate['rate']:.0%} ({rate['passed']}/{rate['runs']})"
                + "".join(f"; {cid} {value:.0%}" for cid, value in rate["checks"].items() if value < 1)
                for rate in trials["rates"]]
    return out
