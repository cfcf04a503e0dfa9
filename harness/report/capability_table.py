"""The capability table in a report and in the README, rendered from its rows alone.

A report carries the table as ``run.agent_kinds`` (rows of
:func:`harness.capabilities.table_rows`): per agent kind, each delivery feature
(inject, steer, start, interrupt, exact completion, native reply) and each
trace the checks read (rollout, call ``_meta``, model log), supported or not,
and for each one it lacks the declared limit: what happens instead. The
README's table is this module's output for the table itself
(``python -m harness.report.capability_table``; a test keeps them equal).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from harness.capabilities import FEATURES, TRACES, table_rows

TITLES = {"exact_completion": "exact completion", "native_reply": "native reply", "call_meta": "call _meta",
          "model_log": "model log"}
README_START = "<!-- capability table: python -m harness.report.capability_table -->"
README_END = "<!-- end of capability table -->"


def _title(name: str) -> str:
    return TITLES.get(name, name)


def _cells(row: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(name, row["features"][name]) for name in FEATURES if name in row["features"]] + \
        [(name, row["traces"][name]) for name in TRACES if name in row["traces"]]


def limits(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(capability, what happens instead) of each one the kind lacks."""
    return [(name, cell["how"]) for name, cell in _cells(row) if not cell["supported"]]


def markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table in Markdown, then each kind's declared limits."""
    names = [*FEATURES, *TRACES]
    out = ["| kind | " + " | ".join(_title(n) for n in names) + " |", "|---|" + "---|" * len(names)]
    for row in rows:
        cells = dict(_cells(row))
        out.append(f"| `{row['kind']}` | " + " | ".join(
            ("yes" if cells[n]["supported"] else "**no**") if n in cells else "" for n in names) + " |")
    out.append("")
    for row in rows:
        lacking = limits(row)
        if lacking:
            out.append(f"- `{row['kind']}` ({row['release']}): " + "; ".join(
                f"no {_title(name)}: {how}" for name, how in lacking))
    return out


def html(rows: Sequence[Mapping[str, Any]]) -> str:
    """The table as an HTML section; each cell's title is how (or the limit), with its evidence."""
    names = [*FEATURES, *TRACES]
    head = "".join(f"<th>{escape(_title(n))}</th>" for n in names)
    body = []
    for row in rows:
        cells = dict(_cells(row))
        tds = []
        for name in names:
            cell = cells.get(name)
            if cell is None:
                tds.append("<td></td>")
                continue
            tip = escape(f"{cell['how']} (evidence: {', '.join(cell['evidence'])})")
            mark = "yes" if cell["supported"] else "no"
            tds.append(f'<td class="{"pass" if cell["supported"] else "muted"}" title="{tip}">{mark}</td>')
        body.append(f"<tr><td><code>{escape(row['kind'])}</code><br><span class=\"muted\">"
                    f"{escape(row['release'])}</span></td>{''.join(tds)}</tr>")
    notes = "".join(f"<li><code>{escape(row['kind'])}</code>: " + "; ".join(
        f"no {escape(_title(name))}: {escape(how)}" for name, how in limits(row)) + "</li>"
        for row in rows if limits(row))
    return (f'<section id="capabilities"><h2>Agent kinds and their capabilities</h2>'
            f'<table class="capabilities"><thead><tr><th>kind</th>{head}</tr></thead><tbody>{"".join(body)}'
            f'</tbody></table><ul class="limits">{notes}</ul>'
            f'<p class="note">A check that needs a capability or trace an agent lacks is skipped for it, naming '
            f'what it lacks; a skip is never counted as a pass.</p></section>')


def verdict_text(check: Mapping[str, Any]) -> str:
    """``pass``, ``FAIL``, or ``skip (B opencode lacks call_meta)``."""
    if check["verdict"] == "skip":
        skipped = check.get("skipped") or {}
        return f"skip ({skipped.get('agent')} {skipped.get('kind')} lacks {skipped.get('capability')})"
    return "pass" if check["verdict"] == "pass" else "FAIL"


def readme_table() -> str:
    """The README's capability table: every kind of the table (contracts/capabilities.json), between its markers."""
    return "\n".join([README_START, *markdown(table_rows()), README_END])


if __name__ == "__main__":
    sys.stdout.write(readme_table() + "\n")
