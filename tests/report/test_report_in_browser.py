"""report.html of a real acceptance run, opened in headless Chromium over the DevTools protocol.

The run is real (the pinned Codex, the scripted model, ``runner.py`` as a user
starts it, with ``--junit``); the browser is Debian's Chromium. The page must
draw every sequence diagram as an SVG picture, show the checks and the
transcripts, and make no request but for itself: every request the page makes
is captured, and a copy of the page that reaches out is caught the same way.
Set ``PEERWIRE_SCREENSHOTS`` to a folder to keep the screenshot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .browser import Browser, Page
from tests.patience import RUN_S, WAIT_S

pytestmark = [pytest.mark.codex, pytest.mark.browser, pytest.mark.heavy]

RUNNER = Path(__file__).resolve().parents[2] / "runner.py"
SCENARIOS = ("smoke", "lifecycle")  # a model's own tool call, and the runner's tool steps (unbound records)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("browser-run")
    argv = [sys.executable, str(RUNNER), "--report-dir", str(out / "reports"), "--runs-root", str(out / "runs"),
            "--junit", str(out / "acceptance.xml")]
    for name in SCENARIOS:
        argv += ["--scenario", name]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_S)
    assert run.returncode == 0, run.stderr[-4000:]
    (folder,) = (out / "reports").iterdir()
    return folder, out / "acceptance.xml"


def offsite(page: Page, allowed: str) -> list[str]:
    """Requests the page made for anything but itself (``allowed``) and ``data:`` URLs."""
    return [r.url for r in page.requests if r.url != allowed and not r.url.startswith("data:")]


def test_report_html_renders_offline_with_diagrams_checks_and_transcripts(real_run, tmp_path):
    folder, junit = real_run
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    url = (folder / "report.html").resolve().as_uri()
    with Browser(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.navigate(url, timeout_s=WAIT_S)
        # Every sequence is a picture the browser laid out: an SVG with one drawn group per step, and width.
        pictures = page.evaluate("Array.from(document.querySelectorAll('svg.sequence')).map(s => "
                                 "[s.querySelectorAll('g.msg, g.note').length, s.getBoundingClientRect().width])")
        assert [steps for steps, _ in pictures] == [len(s["sequence"]) for s in report["scenarios"]]
        assert all(width > 200 for _, width in pictures)
        for scenario in report["scenarios"]:
            anchor = "run-" + scenario["identity"]["slug"]
            shown = page.evaluate(f"""(() => {{ const s = document.getElementById({json.dumps(anchor)});
                return {{checks: Array.from(s.querySelectorAll('table.checks tbody tr')).map(r => r.id),
                         agents: Array.from(s.querySelectorAll('details.transcript > summary strong'))
                                      .map(e => e.textContent),
                         rows: s.querySelectorAll('table.transcript tr.entry').length,
                         calls: s.querySelectorAll('table.transcript tr.tool_call').length,
                         text: s.innerText}}; }})()""")
            assert shown["checks"] == [f"{anchor}-check-{c['id']}" for c in scenario["checks"]]
            assert shown["agents"] == list(scenario["transcripts"])
            assert shown["rows"] == sum(len(e) for e in scenario["transcripts"].values())
            calls = sum(e["kind"] == "tool_call" for entries in scenario["transcripts"].values() for e in entries)
            assert shown["calls"] == calls
            assert scenario["identity"]["label"] in shown["text"]
            for record in scenario["records"]:
                assert " ".join(record["body"].split()) in " ".join(shown["text"].split())
        smoke = next(s for s in report["scenarios"] if s["name"] == "smoke")
        assert any(e["kind"] == "tool_call" and e["title"] == "mcp__peerwire.send_message"
                   for e in smoke["transcripts"]["A"])
        lifecycle = next(s for s in report["scenarios"] if s["name"] == "lifecycle")
        assert any(b["origin"] == "runner" for b in lifecycle["bindings"])
        assert "the runner's own tool step" in page.evaluate("document.body.innerText")
        # Verdict badges stay legible: their text is not drawn in their own background colour.
        assert page.evaluate("Array.from(document.querySelectorAll('.badge')).filter(b => "
                             "getComputedStyle(b).color === getComputedStyle(b).backgroundColor).length") == 0
        shot = page.screenshot(tmp_path / "report.png", height=1600)
        assert shot.stat().st_size > 10_000
        if os.environ.get("PEERWIRE_SCREENSHOTS"):
            shutil.copy(shot, Path(os.environ["PEERWIRE_SCREENSHOTS"]) / "report.png")
        assert offsite(page, url) == [], "the report loaded something from outside itself"
        assert page.exceptions == [] and page.messages == [], (page.exceptions, page.messages)

        # The capture is real: a copy of the page that reaches out (loopback only, blocked by the
        # policy anyway) is caught by the same assertion.
        leaky = folder / "leaky.html"
        leaky.write_text((folder / "report.html").read_text(encoding="utf-8").replace(
            "<body", '<img src="http://127.0.0.1:9/pixel.png"><body', 1), encoding="utf-8")
        page.requests.clear()
        page.messages.clear()
        page.navigate(leaky.resolve().as_uri(), timeout_s=WAIT_S)
        assert offsite(page, leaky.resolve().as_uri()) == ["http://127.0.0.1:9/pixel.png"]
        assert any("Content Security Policy" in m for m in page.messages)

    cases = ET.parse(junit).getroot().iter("testcase")
    assert sorted((c.get("classname"), c.get("name")) for c in cases) == sorted(
        (s["identity"]["label"], c["id"]) for s in report["scenarios"] for c in s["checks"])
