"""report.html, read as a document: what it holds, and that it can load nothing from anywhere."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.report import SecretScan, load_report, write_report
from harness.report.store import tool_list
from tests.evidence.exchange import (ANSWER, CALL_TASK, PROMPT_A, REPLY_ID, ROLLOUT_B, TASK_BODY, TASK_ID,
                                     run_description, task_exchange)


class Page(HTMLParser):
    """Every attribute, script and the CSP of a page."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.attributes: list[tuple[str, str, str]] = []
        self.scripts: list[str] = []
        self.csp: str | None = None
        self._in_script = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            self.attributes.append((tag, name, value or ""))
        if tag == "meta" and dict(attrs).get("http-equiv") == "Content-Security-Policy":
            self.csp = dict(attrs)["content"]
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    artifacts = tmp_path / "artifacts"
    task_exchange().write(artifacts / "task")
    return write_report(tmp_path / "reports", run_description(), artifacts, secrets=SecretScan({}))


def test_the_page_runs_no_script_and_loads_nothing(folder):
    page = Page((folder / "report.html").read_text(encoding="utf-8"))
    assert page.scripts == [] and page.csp is not None and page.csp.startswith("default-src 'none';")
    for directive in ("script-src 'none'", "connect-src 'none'", "img-src data:", "font-src data:", "base-uri 'none'"):
        assert directive in page.csp
    for tag, name, value in page.attributes:
        assert not name.startswith("on"), (tag, name, value)  # no event handler either
        if name in ("src", "href", "action", "srcset", "poster", "data"):
            assert "://" not in value and not value.startswith("//"), (tag, name, value)


def test_each_sequence_is_a_picture_of_its_steps_with_the_source_beside_it(folder):
    report = load_report(folder)
    page = (folder / "report.html").read_text(encoding="utf-8")
    (scenario,) = report["scenarios"]
    steps = scenario["sequence"]
    assert steps and page.count('<svg class="sequence"') == 1 and f'data-steps="{len(steps)}"' in page
    pictured = re.findall(r'<g class="(msg|msg answer|note)">', page)
    assert len(pictured) == len(steps)
    assert pictured == [{"->>": "msg", "-->>": "msg answer", "note": "note"}[s["arrow"]] for s in steps]
    for name in scenario["sequence_participants"]:
        assert page.count("<text") and f">{html.escape(name)}</text>" in page
    # the whole text of each step is its hover title; the Mermaid source is kept beside the picture
    for step in steps:
        assert html.escape(" ".join(step["text"].split())) in page
    assert html.escape(scenario["sequence_diagram"], quote=False) in page  # element text: quotes need no escape


def test_the_page_shows_checks_evidence_bodies_transcripts_and_schemas(folder):
    report = load_report(folder)
    page = (folder / "report.html").read_text(encoding="utf-8")
    text = html.unescape(page)
    (scenario,) = report["scenarios"]
    assert "task · attached · scripted" in text and 'id="run-task.attached"' in page
    assert 'id="run-task.attached-check-task-reply-correlated"' in page
    for record in scenario["records"]:
        assert f'id="run-task.attached-msg-{record["interaction_id"]}"' in page
        assert record["body"] in text
    assert TASK_BODY in text and ANSWER in text and PROMPT_A in text
    # The cited rollout line is shown inline, and linked to the file and the transcript entry.
    # The link goes to the file as the report stores it (compressed), and that file is there.
    assert f'href="artifacts/task/rollouts/B/{ROLLOUT_B}.gz"' in page
    assert (folder / f"artifacts/task/rollouts/B/{ROLLOUT_B}.gz").is_file()
    assert f"rollouts/B/{ROLLOUT_B}:5" in text and "in the transcript" in text
    # The transcript has A's followup_task call with its arguments and its output.
    calls = [e for e in scenario["transcripts"]["A"] if e["kind"] == "tool_call"]
    assert [e["call_id"] for e in calls][:1] == [CALL_TASK]
    assert calls[0]["arguments"]["message"] == TASK_BODY and calls[0]["output"]
    assert json.dumps(calls[0]["arguments"], indent=2, ensure_ascii=False) in text
    # The whole tool schema, not a hash.
    for seen in scenario["tool_schemas"]:
        assert f'id="schema-{seen["sha256"]}"' in page
        assert json.dumps(tool_list(report, seen["sha256"]), indent=2, ensure_ascii=False) in text
    for artifact in report["artifacts"]:
        assert artifact["sha256"] in page
    for cited in (TASK_ID, REPLY_ID):  # the check's records link to their message cards
        assert f'record <a href="#run-task.attached-msg-{cited}">' in page


def test_texts_cannot_inject_markup(tmp_path):
    artifacts = tmp_path / "artifacts"
    exchange = task_exchange()
    exchange.write(artifacts / "task")
    description = run_description(checks=[{"id": "x", "verdict": "fail", "summary": "<img src=x onerror=alert(1)>",
                                           "evidence": {"records": [], "terminal": ["</pre><script>:1"]}}],
                                  passed=False)
    description["scenarios"][0]["description"] = "<script>alert(1)</script>"
    folder = write_report(tmp_path / "reports", description, artifacts, secrets=SecretScan({}))
    page = Page((folder / "report.html").read_text(encoding="utf-8"))
    assert page.scripts == [], "no script, whatever the texts hold"
    assert not any(tag == "img" for tag, _name, _value in page.attributes)


def test_a_line_cited_by_several_checks_is_shown_once_and_linked_from_the_others(tmp_path):
    artifacts = tmp_path / "artifacts"
    task_exchange().write(artifacts / "task")
    cited = f"rollouts/B/{ROLLOUT_B}:5"
    checks = [{"id": f"check-{n}", "verdict": "pass", "summary": f"check {n}",
               "evidence": {"rollout": [cited, f"rollouts/B/{ROLLOUT_B}:{n + 1}"] if n else [cited]}}
              for n in range(3)]
    folder = write_report(tmp_path / "reports", run_description(checks=checks), artifacts, secrets=SecretScan({}))
    page = (folder / "report.html").read_text(encoding="utf-8")
    shown = re.findall(r'<pre class="excerpt" id="([^"]+)">(.*?)</pre>', page, re.S)
    # the line cited three times once, each other line once: three excerpts, all different
    assert len(shown) == 3 and len({text for _, text in shown}) == 3
    (first,) = [anchor for anchor, text in shown if '"ordinal": 4' in html.unescape(text)]
    assert page.count(f'<a href="#{first}">the line, as cited above</a>') == 2
    assert page.count(f'>{cited}</a>') == 3  # every citation still names and links its file


def test_an_excerpt_clips_each_long_string_and_keeps_the_line_s_shape(tmp_path):
    from harness.report.excerpts import STRING_CHARS, ArtifactLines
    prompt = "You are a coding agent. " * 100
    line = {"type": "session_meta", "payload": {"base_instructions": {"text": prompt}, "cwd": "/w", "n": 3}}
    folder = tmp_path / "report"
    (folder / "run").mkdir(parents=True)
    (folder / "run" / "rollout.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    shown = ArtifactLines(folder).excerpt("run", "rollout.jsonl:1")
    assert shown.path == "run/rollout.jsonl"
    assert f"{prompt[:STRING_CHARS]}… ({len(prompt)} characters in all)" in shown.text
    assert prompt[:STRING_CHARS + 1] not in shown.text
    assert '"cwd": "/w"' in shown.text and '"n": 3' in shown.text and '"type": "session_meta"' in shown.text
