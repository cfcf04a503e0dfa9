"""``peerwire-harness mailbox``: the ``mailbox`` profile against one server, through its binding.

    peerwire-harness mailbox [--binding MODULE:CLASS] [--server-cmd CMD --provisioner MODULE:CLASS]
                             [--report-dir DIR]

Without ``--binding`` the server is one of this contract's seven tools (the
reference by default; ``--server-cmd`` and ``--provisioner`` as the contract
suite takes them). The run writes ``compliance.json`` and ``compliance.md`` in
the contract suite's format (profile ``mailbox``), so ``report matrix`` puts it
beside any other run. Exit status: 0 when every MUST passes or is not
applicable, 1 when one fails or was not tested, 2 for a binding that cannot be
loaded or started.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..interface import load_class
from .vocabulary import Binding
from .profile import PROFILE, Judgement, Profile, requirements
from .seven_tools import SevenToolBinding

PROG = "peerwire-harness mailbox"


def judge(judgement: Judgement, *, by_design: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Each requirement's entry for ``compliance.json``: its result and the findings behind it."""
    entries = []
    for req in requirements():
        findings = [f for f in judgement.findings if f.requirement == req.id]
        failures = [f for f in findings if not f.passed]
        entry: dict[str, Any] = {
            "id": req.id, "level": req.level, "profile": PROFILE, "source": req.source,
            "origin": "messaging contract", "source_group": "messaging contract",
            "citation": f"{req.source} (the messaging contract's own rule): {req.behaviour}",
            "behaviour": req.behaviour, "selected": True, "passed_checks": len(findings) - len(failures),
            "items": [], "failures": [{"requirement": req.id, "passed": False, "check": f.check, "detail": f.detail,
                                       "item": f"mailbox::{req.id}", "exchange": f.exchange} for f in failures],
        }
        if req.id in judgement.broken:
            entry["result"] = "fail"
            entry["failures"].append({"requirement": req.id, "passed": False, "check": "the check runs to its end",
                                      "detail": judgement.broken[req.id], "item": f"mailbox::{req.id}"})
        elif req.id in judgement.not_applicable and not findings:
            entry["result"] = "not applicable"
            entry["because"] = judgement.not_applicable[req.id]
        else:
            entry["result"] = "fail" if failures else "pass" if findings else "not tested"
        if entry["result"] == "fail" and by_design and req.id in by_design:
            entry["design_finding"] = by_design[req.id]
        entries.append(entry)
    return entries


def verdict(entries: list[dict[str, Any]]) -> tuple[bool, list[str]]:
    problems = [f"MUST {e['id']} {'failed' if e['result'] == 'fail' else 'was not tested'}"
                + (f": {e['failures'][0]['detail']}" if e["failures"] else "")
                for e in entries if e["level"] == "MUST" and e["result"] in ("fail", "not tested")]
    return not problems, problems


def document(binding: Binding, entries: list[dict[str, Any]], target: dict[str, Any]) -> dict[str, Any]:
    compliant, problems = verdict(entries)
    return {
        "suite": "peerwire mailbox profile", "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": {**target, "binding": f"{type(binding).__module__}:{type(binding).__qualname__}",
                   "server_info": getattr(binding, "server_info", None) or {"name": binding.label}},
        "selection": {"profiles": [PROFILE], "level": "MAY", "patterns": []},
        "verdict": {"compliant": compliant, "exit_status": 0 if compliant else 1, "problems": problems},
        "requirements": entries,
    }


def markdown(doc: dict[str, Any]) -> str:
    entries = doc["requirements"]
    lines = [f"# Mailbox profile: {doc['target']['server_info'].get('name', '?')}", "",
             f"- Verdict: **{'compliant' if doc['verdict']['compliant'] else 'not compliant'}**",
             f"- Generated: {doc['generated_at']}", ""]
    if doc["verdict"]["problems"]:
        lines += ["## Why the run fails", ""] + [f"- {p[:400]}" for p in doc["verdict"]["problems"]] + [""]
    lines += ["| requirement | level | result |", "|---|---|---|"]
    for e in entries:
        note = f" — because {e['because']}" if e.get("because") else ""
        note += f" — a finding about the design: {e['design_finding']}" if e.get("design_finding") else ""
        lines.append(f"| `{e['id']}` | {e['level']} | {e['result']}{note} |")
    for e in entries:
        if e["result"] != "fail":
            continue
        lines += ["", f"### `{e['id']}` ({e['level']}): fail", "", f"Rule: {e['citation']}", ""]
        if e.get("design_finding"):
            lines += [f"A finding about the design, by the messaging contract's rule (not MCP's): "
                      f"{e['design_finding']}", ""]
        for failure in e["failures"]:
            lines.append(f"- expected {failure['check']}: {failure['detail'][:600]}")
            for line in failure.get("exchange") or []:
                lines.append(f"    - `{line['dir']}` {line['at_ms']} ms: `{line['line'][:300]}`")
    return "\n".join(lines) + "\n"


def build_binding(args: argparse.Namespace) -> Binding:
    if args.binding:
        cls = load_class(args.binding)
        return cls()
    return SevenToolBinding(shlex.split(args.server_cmd) if args.server_cmd else None, args.provisioner)


class BindingFailedToOpen(RuntimeError):
    """The binding could not start its server: the run broke, which says nothing of the server's semantics."""


def run(binding: Binding, report_dir: Path, *, target: dict[str, Any] | None = None,
        progress: Any = None) -> dict[str, Any]:
    """Open ``binding`` in a temporary folder, run the profile, close it, and write the reports."""
    with tempfile.TemporaryDirectory(prefix="peerwire-mailbox-") as work:
        try:
            binding.open(Path(work))
        except Exception as exc:
            binding.close()
            raise BindingFailedToOpen(f"{type(exc).__name__}: {exc}") from exc
        try:
            judgement = Profile(binding, progress=progress).run()
        finally:
            binding.close()
    doc = document(binding, judge(judgement, by_design=getattr(binding, "by_design", None)), target or {})
    report_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    (report_dir / "compliance.json").write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", "utf-8")
    (report_dir / "compliance.md").write_text(markdown(doc), "utf-8")
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Judge a messaging server on the mailbox profile "
                                     "(nothing lost, duplicated or reordered; bodies byte for byte; durability; "
                                     "unforgeable senders; isolated inboxes) through a binding of its tools.")
    parser.add_argument("--binding", metavar="MODULE:CLASS",
                        help="the server's binding (default: this contract's seven tools)")
    parser.add_argument("--server-cmd", metavar="CMD", help="a seven-tool server's command (default: the reference)")
    parser.add_argument("--provisioner", metavar="MODULE:CLASS", help="a seven-tool server's provisioner")
    parser.add_argument("--report-dir", type=Path, metavar="DIR",
                        help="where to write compliance.json and compliance.md (default: reports/mailbox-<UTC time>)")
    args = parser.parse_args(argv)
    if args.binding and (args.server_cmd or args.provisioner):
        parser.error("--binding names the whole surface; --server-cmd and --provisioner are for the seven tools")
    report_dir = args.report_dir or Path("reports") / f"mailbox-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}"
    try:
        binding = build_binding(args)
    except (ValueError, TypeError) as exc:
        print(f"{PROG}: cannot load the binding: {exc}", file=sys.stderr)
        return 2
    target = {"server_cmd": shlex.split(args.server_cmd) if args.server_cmd else None,
              "provisioner": args.provisioner}
    try:
        doc = run(binding, report_dir, target=target,
                  progress=lambda name: print(f"mailbox: {name}", file=sys.stderr, flush=True))
    except BindingFailedToOpen as exc:
        print(f"{PROG}: the binding could not start the server: {exc}", file=sys.stderr)
        return 2
    for entry in doc["requirements"]:
        if entry["result"] != "pass":
            reason = entry.get("because") or (entry["failures"][0]["detail"][:160] if entry["failures"] else "")
            print(f"{entry['result'].upper():>15}  {entry['level']} {entry['id']}: {reason}")
    print(f"report: {report_dir / 'compliance.json'}")
    print(f"verdict: {'compliant' if doc['verdict']['compliant'] else 'NOT compliant'}")
    return doc["verdict"]["exit_status"]
