"""The results matrix (``report matrix``) and regressions between two runs (``report matrix --compare``).

The compliance reports are written by the suite's own judge and report writer
from votes, as a contract run writes them, for four implementations of
different profiles: the matrix must show each one's state for every
requirement, score each column over the profiles it ran with "not tested"
counting against, and link every failure to its evidence. The page is opened
in headless Chromium, where every failing cell's link must land on an element
holding that failure's rule and exchanged lines, and the page must load nothing.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from harness.contract.baseline import parse_baseline
from harness.contract.compliance import judge
from harness.contract.manifest import PROTOCOL, Selection, manifest
from harness.contract.report import write_reports
from harness.contract.verdicts import Vote
from harness.report import cli as report_cli
from harness.report.matrix import NOT_RUN, compare, load_column, matrix_document, write_matrix

from .browser import Browser

MESSAGING = "messaging"
SENT = '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": [1, 2]}'


def _ids(profile: str, level: str = "MUST") -> list[str]:
    return sorted(r.id for r in manifest() if r.profile == profile and r.level.name == level
                  and not r.verified_by and not r.deferred)


def _failure(rid: str, detail: str) -> Vote:
    return Vote(rid, False, "an answer with the request's id", item=f"suite::{rid}", step="call", detail=detail,
                exchange=[{"dir": "sent", "at_ms": 5, "line": SENT},
                          {"dir": "received", "at_ms": 9, "line": '{"jsonrpc": "2.0", "id": 4, "result": {}}'}])


def _run(tmp_path: Path, name: str, profiles: tuple[str, ...], failing: set[str] = frozenset(),
         untested: set[str] = frozenset(), baseline: str = "", server_info: dict | None = None) -> Path:
    votes = []
    for profile in profiles:
        for rid in _ids(profile):
            if rid in untested:
                continue
            votes.append(_failure(rid, f"{name} broke {rid}") if rid in failing else Vote(rid, True, "ok", item="t"))
    compliance = judge(manifest(), votes, Selection(profiles=profiles), parse_baseline(baseline), [])
    target = {"server_cmd": [f"/opt/bin/{name}", "serve"], "provisioner": None,
              **({"server_info": server_info} if server_info else {})}
    folder = tmp_path / name
    write_reports(folder, compliance, target=target, tests={"passed": 1})
    return folder


@pytest.fixture
def four_runs(tmp_path):
    protocol, messaging = _ids(PROTOCOL), _ids(MESSAGING)
    return {
        "reference": _run(tmp_path, "reference", (PROTOCOL, MESSAGING), server_info={"name": "ref", "version": "1.2"}),
        "sdk": _run(tmp_path, "sdk", (PROTOCOL, MESSAGING), failing={protocol[0], messaging[1]},
                    untested={messaging[2]}),
        "baselined": _run(tmp_path, "baselined", (PROTOCOL, MESSAGING), failing={protocol[1]},
                          baseline=f"{protocol[1]}  # known: the SDK drops it\n"),
        "time": _run(tmp_path, "time", (PROTOCOL,), failing={protocol[0], protocol[2]}),
    }


def test_every_cell_is_the_runs_own_result_and_scores_count_not_tested_against(four_runs):
    columns = [load_column(str(path)) for path in four_runs.values()]
    assert [c.label for c in columns] == ["ref", "sdk", "baselined", "time"]
    assert columns[0].version == "1.2"
    document = matrix_document(columns)
    for row in document["rows"]:
        for column, cell in zip(columns, row["cells"]):
            entry = json.loads(column.path.read_text("utf-8"))
            own = next(r for r in entry["requirements"] if r["id"] == row["id"])
            expected = own["result"] if own["profile"] in column.profiles else NOT_RUN
            assert cell["state"] == expected, (row["id"], column.label)
            assert ("evidence" in cell) == (expected in ("fail", "expected failure"))
    protocol, messaging = _ids(PROTOCOL), _ids(MESSAGING)
    # No profile any column ran is left out, and none that no column ran is shown.
    assert {r["id"] for r in document["rows"]} >= set(protocol) | set(messaging)
    assert all(r["profile"] in (PROTOCOL, MESSAGING) for r in document["rows"])
    must = {c["label"]: c["headline"]["MUST"] for c in document["columns"]}
    assert must["sdk"]["fail"] == 2 and must["sdk"]["not_tested"] >= 1
    assert must["sdk"]["pass"] == must["ref"]["pass"] - 3
    assert must["baselined"]["expected_failure"] == 1 and must["baselined"]["fail"] == 0
    assert must["time"]["total"] < must["ref"]["total"], "a column is scored on the profiles it ran"
    # The protocol-only run shows the messaging rows as not run, never as not tested or a pass.
    time = columns[3]
    assert {time.state(rid) for rid in messaging} == {NOT_RUN}


@pytest.mark.browser
def test_the_page_links_every_failing_cell_to_its_evidence_in_chromium(four_runs, tmp_path):
    out = tmp_path / "matrix"
    status = report_cli.main(["matrix", *(str(p) for p in four_runs.values()), "--out", str(out)], out=io.StringIO())
    assert status == 0
    assert sorted(p.name for p in out.iterdir()) == ["matrix.html", "matrix.json", "matrix.md"]
    document = json.loads((out / "matrix.json").read_text("utf-8"))
    wanted = sorted(cell["evidence"].partition("#")[2] for row in document["rows"] for cell in row["cells"]
                    if "evidence" in cell)
    assert len(wanted) == 5  # sdk 2, baselined 1 (an expected failure), time 2, the reference none
    url = (out / "matrix.html").resolve().as_uri()
    with Browser(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.navigate(url)
        links = page.evaluate("""Array.from(document.querySelectorAll('td.fail a, td.xfail a')).map(a => {
            const id = a.getAttribute('href').slice(1); const target = document.getElementById(id);
            return [id, target ? target.innerText : null]; })""")
        assert sorted(id_ for id_, _ in links) == wanted
        for id_, text in links:
            assert text is not None, f"{id_}: a failing cell links to nothing"
            assert "Rule:" in text and SENT in text, f"{id_}: the evidence lacks the rule or the exchanged lines"
        assert page.evaluate("document.querySelectorAll('script').length") == 0
        assert [r.url for r in page.requests if r.url != url and not r.url.startswith("data:")] == []
        assert page.exceptions == []


def test_runs_of_one_implementation_over_other_profiles_are_one_column(tmp_path):
    protocol, messaging = _ids(PROTOCOL), _ids(MESSAGING)
    wire = _run(tmp_path, "wire", (PROTOCOL,), failing={protocol[0]})
    tools = _run(tmp_path, "tools", (MESSAGING,), failing={messaging[0]})
    out = tmp_path / "matrix"
    assert report_cli.main(["matrix", f"impl={wire}", f"impl={tools}", "--out", str(out)], out=io.StringIO()) == 0
    document = json.loads((out / "matrix.json").read_text("utf-8"))
    assert [c["label"] for c in document["columns"]] == ["impl"]
    assert document["columns"][0]["profiles"] == [PROTOCOL, MESSAGING]
    states = {row["id"]: row["cells"][0]["state"] for row in document["rows"]}
    assert states[protocol[0]] == "fail" and states[messaging[0]] == "fail"
    assert states[protocol[1]] == "pass" and states[messaging[1]] == "pass"


def test_compare_gates_on_a_new_must_failure_and_lists_fixes(tmp_path):
    protocol, messaging = _ids(PROTOCOL), _ids(MESSAGING)
    old = _run(tmp_path, "old", (PROTOCOL, MESSAGING), failing={protocol[0]})
    same = _run(tmp_path, "same", (PROTOCOL, MESSAGING), failing={protocol[0]})
    fixed = _run(tmp_path, "fixed", (PROTOCOL, MESSAGING))
    regressed = _run(tmp_path, "regressed", (PROTOCOL, MESSAGING), untested={protocol[0]}, failing={messaging[3]})

    def run(a: Path, b: Path) -> tuple[int, str]:
        buffer = io.StringIO()
        return report_cli.main(["matrix", "--compare", str(a), str(b)], out=buffer), buffer.getvalue()

    assert run(old, same)[0] == 0
    status, text = run(old, fixed)
    assert status == 0 and f"MUST {protocol[0]}: fail -> pass" in text and "fixed: 1" in text
    status, text = run(old, regressed)
    assert status == 1, text
    assert f"MUST {messaging[3]}: pass -> fail" in text and "newly failing: 1" in text
    assert f"MUST {protocol[0]}: fail -> not tested" in text  # a change of state, listed, not a fix
    changes = compare(load_column(str(old)), load_column(str(regressed)))
    assert {c.id for c in changes} == {protocol[0], messaging[3]}


def test_unreadable_or_ambiguous_input_is_one_line_and_status_2(tmp_path, capsys, four_runs):
    (tmp_path / "empty").mkdir()
    assert report_cli.main(["matrix", str(tmp_path / "empty")], out=io.StringIO()) == 2
    assert "no compliance.json" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"suite": 1}', "utf-8")
    assert report_cli.main(["matrix", str(tmp_path / "bad.json")], out=io.StringIO()) == 2
    assert "not a contract run" in capsys.readouterr().err
    run = str(four_runs["sdk"])
    assert report_cli.main(["matrix", run, run, "--out", str(tmp_path / "m")], out=io.StringIO()) == 2
    assert "both ran the profile" in capsys.readouterr().err
    assert report_cli.main(["matrix", run, f"again={run}", "--out", str(tmp_path / "m")], out=io.StringIO()) == 0
    columns = [load_column(run), load_column(f"again={run}")]
    write_matrix(columns, tmp_path / "m2")
    assert "| again |" in (tmp_path / "m2" / "matrix.md").read_text("utf-8")
