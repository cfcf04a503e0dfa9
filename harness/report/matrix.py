"""The results matrix: many implementations' compliance reports side by side, and regressions between two runs.

    peerwire-harness report matrix RUN... [--out DIR]
    peerwire-harness report matrix --compare OLD NEW

RUN is a contract run's report folder (or its ``compliance.json``), optionally
labelled ``LABEL=RUN``; without a label a column is named after the server
command (and the ``serverInfo`` name and version the run saw, when it has
them). Runs of different profiles mix freely: a column is judged only on the
profiles its run selected, and a profile it did not run shows as *not run*.

The matrix writes ``matrix.html`` (one self-contained page: no script, nothing
loaded), ``matrix.md`` and ``matrix.json``. Rows are the requirements, grouped
by the source of their rule (JSON-RPC 2.0, each MCP revision, the messaging
contract) and by profile; each column is one run. A cell is pass, fail,
expected failure, blocked, not tested, not applicable, verified by the
reference only, or not run. Every failing cell (and every expected failure)
links to that failure's evidence on the same page: the rule, the check, and
the lines sent and received. A column's headline gives a score per level over
the profiles it ran, where *not tested* counts against, as in the run's own
verdict.

``--compare OLD NEW`` takes two runs of one implementation and lists what newly
fails, what was fixed, and every other change of state. Exit status: 1 when a
MUST newly fails (so CI can gate on it), 0 otherwise, 2 for unreadable input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, TextIO

from .html import CONTENT_SECURITY_POLICY

COMPLIANCE_JSON = "compliance.json"
LEVELS = ("MUST", "SHOULD", "MAY")
NOT_RUN = "not run"
"""The run did not select the requirement's profile: not part of that column's verdict."""
FAILING = ("fail", "expected failure")
"""Results whose cells link to the failure's evidence."""
CLASSES = {"pass": "pass", "fail": "fail", "expected failure": "xfail", "not tested": "untested",
           "not applicable": "na", "verified by the reference only": "refonly", NOT_RUN: "notrun"}
SYMBOLS = {"pass": "pass", "fail": "FAIL", "expected failure": "xfail", "not tested": "not tested",
           "not applicable": "n/a", "verified by the reference only": "ref only", NOT_RUN: "—"}
UNSCORED = ("not applicable", "verified by the reference only", NOT_RUN)
SOURCE_ORDER = {"JSON-RPC 2.0": 0, "messaging contract": 2}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class MatrixInputError(ValueError):
    """A run that cannot be read as a contract run's compliance report."""


@dataclass(frozen=True)
class Column:
    """One run of one implementation."""

    label: str
    version: str | None
    date: str
    path: Path
    profiles: tuple[str, ...]
    requirements: dict[str, dict[str, Any]]
    document: dict[str, Any] = field(repr=False)

    @property
    def slug(self) -> str:
        return _UNSAFE.sub("-", self.label).strip("-") or "run"

    def state(self, requirement_id: str) -> str:
        entry = self.requirements.get(requirement_id)
        if entry is None or entry["profile"] not in self.profiles:
            return NOT_RUN
        return _result(entry)

    def headline(self) -> dict[str, dict[str, int]]:
        """Per level: total (scored), pass, fail, expected failure, blocked, not tested."""
        out: dict[str, dict[str, int]] = {}
        for level in LEVELS:
            states = [self.state(rid) for rid, entry in self.requirements.items() if entry["level"] == level]
            scored = [s for s in states if s not in UNSCORED]
            out[level] = {"total": len(scored), "pass": scored.count("pass"), "fail": scored.count("fail"),
                          "expected_failure": scored.count("expected failure"),
                          "blocked": sum(s.startswith("blocked") for s in scored),
                          "not_tested": scored.count("not tested")}
        return out


def _result(entry: dict[str, Any]) -> str:
    result = str(entry["result"])
    if result.startswith("blocked"):
        return "blocked"
    return result


def load_column(spec: str) -> Column:
    """``[LABEL=]PATH``: a contract run's report folder or its ``compliance.json``."""
    label, sep, where = spec.partition("=")
    if not sep or Path(spec).exists():
        label, where = "", spec
    path = Path(where)
    if path.is_dir():
        path = path / COMPLIANCE_JSON
    try:
        document = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise MatrixInputError(f"{where}: no {COMPLIANCE_JSON} there (give a contract run's report folder)") from None
    except (OSError, ValueError) as exc:
        raise MatrixInputError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(document, dict) or "requirements" not in document or "selection" not in document:
        raise MatrixInputError(f"{path}: not a contract run's {COMPLIANCE_JSON}")
    target = document.get("target") or {}
    info = target.get("server_info") or {}
    name = label or info.get("name") or _command_name(target.get("server_cmd")) or path.parent.name
    return Column(label=name, version=info.get("version"), date=str(document.get("generated_at", "")),
                  path=path, profiles=tuple(document["selection"].get("profiles") or ()),
                  requirements={r["id"]: r for r in document["requirements"]}, document=document)


def _command_name(command: Any) -> str | None:
    """The program a server command runs, past interpreters (``node x/dist/index.js`` is ``x``)."""
    if not command:
        return None
    words = [str(w) for w in command]
    for word in words:
        base = Path(word).name
        if base in ("python", "python3", "node", "uv", "uvx", "npx", "-m", "run") or base.startswith("-"):
            continue
        if base in ("index.js", "main.js", "cli.js", "__main__.py") and len(Path(word).parts) > 2:
            parts = Path(word).parts
            return parts[-3] if parts[-2] in ("dist", "build", "bin") else parts[-2]
        return base
    return Path(words[0]).name


def combine(columns: Sequence[Column]) -> list[Column]:
    """One column per label: runs of one implementation over different profiles (a contract run and a mailbox
    run, say) become one column; two runs of one label that share a profile are refused."""
    out: dict[str, Column] = {}
    for column in columns:
        first = out.get(column.label)
        if first is None:
            out[column.label] = column
            continue
        shared = sorted(set(first.profiles) & set(column.profiles))
        if shared:
            raise MatrixInputError(f"two runs labelled {column.label!r} both ran the profile {', '.join(shared)}: "
                                   "label them apart, as LABEL=RUN")
        own = {rid: e for rid, e in column.requirements.items() if e["profile"] in column.profiles}
        out[column.label] = Column(first.label, first.version or column.version, max(first.date, column.date),
                                   first.path, first.profiles + column.profiles,
                                   {**first.requirements, **own}, first.document)
    return list(out.values())


@dataclass(frozen=True)
class Row:
    id: str
    level: str
    profile: str
    source_group: str
    behaviour: str
    citation: str


def rows(columns: Sequence[Column]) -> list[Row]:
    """Every requirement of a profile some column ran, grouped by source, then profile, level and id."""
    seen: dict[str, Row] = {}
    ran = {profile for column in columns for profile in column.profiles}
    for column in columns:
        for rid, entry in column.requirements.items():
            if entry["profile"] not in ran:
                continue
            seen.setdefault(rid, Row(rid, entry["level"], entry["profile"], entry.get("source_group", "other"),
                                     entry.get("behaviour", ""), entry.get("citation", entry.get("source", ""))))
    return sorted(seen.values(), key=lambda r: (SOURCE_ORDER.get(r.source_group, 1), r.source_group, r.profile,
                                                LEVELS.index(r.level) if r.level in LEVELS else 9, r.id))


def anchor(column: Column, requirement_id: str) -> str:
    return f"ev-{column.slug}-{_UNSAFE.sub('-', requirement_id)}"


def matrix_document(columns: Sequence[Column]) -> dict[str, Any]:
    """The content of ``matrix.json``."""
    return {
        "columns": [{"label": c.label, "version": c.version, "date": c.date, "report": str(c.path),
                     "profiles": list(c.profiles), "headline": c.headline()} for c in columns],
        "rows": [{"id": r.id, "level": r.level, "profile": r.profile, "source_group": r.source_group,
                  "citation": r.citation,
                  "cells": [{"state": c.state(r.id),
                             **({"because": c.requirements[r.id]["because"]}
                                if c.state(r.id) == "not applicable" and c.requirements[r.id].get("because") else {}),
                             **({"evidence": f"matrix.html#{anchor(c, r.id)}"} if c.state(r.id) in FAILING else {})}
                            for c in columns]}
                 for r in rows(columns)],
    }


def _headline_text(headline: dict[str, dict[str, int]]) -> list[str]:
    out = []
    for level in LEVELS:
        s = headline[level]
        if not s["total"]:
            continue
        extra = [f"{s[k]} {word}" for k, word in (("fail", "fail"), ("expected_failure", "xfail"),
                                                   ("blocked", "blocked"), ("not_tested", "not tested")) if s[k]]
        out.append(f"{level} {s['pass']}/{s['total']}" + (f" ({', '.join(extra)})" if extra else ""))
    return out or ["nothing scored"]


def _column_title(column: Column) -> str:
    return column.label + (f" {column.version}" if column.version else "")


def render_markdown(columns: Sequence[Column]) -> str:
    """``matrix.md``: one table per source group; failing cells link into ``matrix.html``."""
    lines = ["# Results matrix", "", "| implementation | run | profiles | score (not tested counts against) |",
             "|---|---|---|---|"]
    for c in columns:
        lines.append(f"| {_md(_column_title(c))} | {_md(c.date)} | {', '.join(c.profiles) or '—'} | "
                     f"{'; '.join(_headline_text(c.headline()))} |")
    current = None
    for row in rows(columns):
        group = (row.source_group, row.profile)
        if group != current:
            current = group
            lines += ["", f"## {row.source_group} — profile `{row.profile}`", "",
                      "| requirement | level | " + " | ".join(_md(_column_title(c)) for c in columns) + " |",
                      "|---|---|" + "---|" * len(columns)]
        cells = []
        for c in columns:
            state = c.state(row.id)
            text = SYMBOLS.get(state, state)
            because = (c.requirements.get(row.id) or {}).get("because")
            if because and state == "not applicable":
                text += f" ({_md(because)})"
            cells.append(f"[{text}](matrix.html#{anchor(c, row.id)})" if state in FAILING else text)
        lines.append(f"| `{row.id}` | {row.level} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
thead th{background:#f3f3f3;position:sticky;top:0}
td.pass{background:#e3f6e3}td.fail{background:#fbd9d9;font-weight:bold}td.xfail{background:#fdf0cf}
td.blocked{background:#e8e0f5}td.untested{background:#eee;color:#555}td.na,td.refonly,td.notrun{color:#888}
code{font-size:12px}pre{background:#f7f7f7;padding:6px;white-space:pre-wrap;word-break:break-all;max-width:110em}
.ev{border-top:1px solid #ddd;margin-top:1em}.rule{color:#444}
"""



def render_html(columns: Sequence[Column]) -> str:
    """``matrix.html``: the table, then every failure's evidence, each with its anchor."""
    head = "".join(f"<th>{escape(_column_title(c))}<br><small>{escape(c.date)}<br>"
                   f"{escape(', '.join(c.profiles) or '—')}</small></th>" for c in columns)
    scores = "".join("<td>" + "<br>".join(escape(t) for t in _headline_text(c.headline())) + "</td>"
                     for c in columns)
    body = ["<table><thead><tr><th>requirement</th><th>level</th>" + head + "</tr></thead><tbody>",
            f"<tr><th colspan=2>score per level (not tested counts against)</th>{scores}</tr>"]
    current = None
    for row in rows(columns):
        group = (row.source_group, row.profile)
        if group != current:
            current = group
            body.append(f"<tr><th colspan={2 + len(columns)}>{escape(row.source_group)} — profile "
                        f"<code>{escape(row.profile)}</code></th></tr>")
        cells = []
        for c in columns:
            state = c.state(row.id)
            css = "blocked" if state == "blocked" else CLASSES.get(state, "untested")
            text = escape(SYMBOLS.get(state, state))
            if state in FAILING:
                text = f'<a href="#{anchor(c, row.id)}">{text}</a>'
            because = (c.requirements.get(row.id) or {}).get("because")
            title = f"{state}, because {because}" if because and state == "not applicable" else state
            if because and state == "not applicable":
                text += f"<br><small>{escape(because)}</small>"
            cells.append(f'<td class="{css}" title="{escape(title)}">{text}</td>')
        body.append(f'<tr><td><code title="{escape(row.behaviour)}">{escape(row.id)}</code></td>'
                    f"<td>{escape(row.level)}</td>{''.join(cells)}</tr>")
    body.append("</tbody></table><h2>Evidence of every failure</h2>")
    for c in columns:
        for row in rows(columns):
            if c.state(row.id) in FAILING:
                body.append(_evidence_html(c, row))
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">'
            f"<title>Results matrix</title><style>{STYLE}</style></head><body><h1>Results matrix</h1>"
            + "".join(body) + "</body></html>\n")


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _shown(text: str) -> str:
    """``text`` escaped for the page, its control characters (a NUL a server was sent) written as ``\\xNN``."""
    return escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text))


def _evidence_html(column: Column, row: Row) -> str:
    entry = column.requirements[row.id]
    parts = [f'<div class="ev" id="{anchor(column, row.id)}"><h3><code>{escape(row.id)}</code> ({escape(row.level)}) '
             f"— {escape(_column_title(column))}: {escape(column.state(row.id))}</h3>",
             f'<p class="rule">Rule: {escape(row.citation)}</p>']
    if entry.get("baselined"):
        parts.append(f"<p>Baselined: {escape(str(entry['baselined']))}</p>")
    if entry.get("design_finding"):
        parts.append("<p>A finding about the design, by the messaging contract's rule (not MCP's): "
                     f"{escape(str(entry['design_finding']))}</p>")
    for failure in entry.get("failures") or []:
        where = failure.get("case") or failure.get("item", "")
        parts.append(f"<p>Expected <b>{escape(str(failure.get('check', '')))}</b> in <code>{escape(str(where))}"
                     f"</code>" + (f", step <code>{escape(str(failure['step']))}</code>" if failure.get("step") else "")
                     + "</p>")
        if failure.get("detail"):
            parts.append(f"<pre>{_shown(str(failure['detail']))}</pre>")
        for part in ("request", "response"):
            if failure.get(part) is not None:
                parts.append(f"<p>{part}:</p><pre>{_shown(json.dumps(failure[part], ensure_ascii=False))}</pre>")
        exchange = failure.get("exchange") or []
        if exchange:
            lines = [f"{line.get('at_ms', '')!s:>8} ms {line.get('dir', ''):<8} {line.get('line', '')}"
                     for line in exchange]
            parts.append("<p>lines exchanged:</p><pre>" + _shown("\n".join(lines)) + "</pre>")
    return "".join(parts) + "</div>"


def write_matrix(columns: Sequence[Column], out: Path) -> list[Path]:
    """Write ``matrix.html``, ``matrix.md`` and ``matrix.json`` into ``out`` (created)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (("matrix.html", render_html(columns)), ("matrix.md", render_markdown(columns)),
                       ("matrix.json", json.dumps(matrix_document(columns), ensure_ascii=False, indent=2) + "\n")):
        (out / name).write_text(text, "utf-8")
        written.append(out / name)
    return written


@dataclass(frozen=True)
class Change:
    id: str
    level: str
    old: str
    new: str

    @property
    def newly_fails(self) -> bool:
        return self.new == "fail" and self.old != "fail"

    @property
    def fixed(self) -> bool:
        return self.old == "fail" and self.new == "pass"


def compare(old: Column, new: Column) -> list[Change]:
    """Every requirement whose state differs between two runs, in row order."""
    ids = [r.id for r in rows([old, new])]
    level = {**{k: v["level"] for k, v in old.requirements.items()},
             **{k: v["level"] for k, v in new.requirements.items()}}
    return [Change(rid, level[rid], old.state(rid), new.state(rid)) for rid in ids
            if old.state(rid) != new.state(rid)]


def print_comparison(old: Column, new: Column, changes: Iterable[Change], out: TextIO) -> int:
    changes = list(changes)
    if old.document.get("target", {}).get("server_cmd") != new.document.get("target", {}).get("server_cmd"):
        print(f"note: the two runs name different server commands ({old.label} and {new.label})", file=out)
    newly = [c for c in changes if c.newly_fails]
    fixed = [c for c in changes if c.fixed]
    other = [c for c in changes if not c.newly_fails and not c.fixed]
    for title, group in (("newly failing", newly), ("fixed", fixed), ("changed state", other)):
        print(f"{title}: {len(group)}", file=out)
        for c in group:
            print(f"  {c.level} {c.id}: {c.old} -> {c.new}", file=out)
    gate = [c for c in newly if c.level == "MUST"]
    print(f"regression: {len(gate)} MUST newly failing" if gate else "no MUST newly fails", file=out)
    return 1 if gate else 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, *,
         prog: str = "peerwire-harness report matrix") -> int:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog=prog, description="Compliance reports of many implementations side by "
                                     "side, or the regressions between two runs of one (--compare).")
    parser.add_argument("runs", nargs="*", metavar="[LABEL=]RUN",
                        help="contract run report folders (or their compliance.json), optionally labelled")
    parser.add_argument("--out", type=Path, default=Path("reports/matrix"),
                        help="where to write matrix.html, matrix.md and matrix.json (default: reports/matrix)")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                        help="list what newly fails, what is fixed and what changed; exit 1 on a new MUST failure")
    args = parser.parse_args(argv)
    if bool(args.runs) == bool(args.compare):
        parser.error("give either RUN... or --compare OLD NEW")
    try:
        if args.compare:
            old, new = (load_column(spec) for spec in args.compare)
            return print_comparison(old, new, compare(old, new), out)
        columns = [load_column(spec) for spec in args.runs]
    except MatrixInputError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    try:
        columns = combine(columns)
    except MatrixInputError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    for path in write_matrix(columns, args.out):
        print(f"wrote {path}", file=out)
    for c in columns:
        print(f"{_column_title(c)}: {'; '.join(_headline_text(c.headline()))}", file=out)
    return 0
