"""The report's run-level store: each tool list and each request body value kept once for the whole report,
every request still expanding to its whole body (hash-checked), every citation still resolving, through a
write and through a merge of shards."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import jsonschema

from harness.evidence import stored
from harness.evidence.layout import MODEL_REQUESTS
from harness.evidence.model_bodies import RUN_BODIES, BodyStore, bodies_path, digest, read_log
from harness.evidence.model_log import ModelRequestLog
from harness.report import SecretScan, load_report, report_schema, write_report
from harness.report.shard_reports import merge_reports
from harness.report.picture import STYLE as SEQUENCE_STYLE
from harness.report.store import tool_list
from harness.shards import Shard, plan
from tests.evidence.exchange import PEERWIRE_TOOLS, run_description, task_exchange

RUNS = ("task", "again", "third")


def compact(folder: Path) -> list[dict]:
    """Store ``folder``'s model log as the scripted model writes it (each body compacted, its values in the
    bodies file beside the log); returns the whole request bodies, as sent."""
    log = folder / MODEL_REQUESTS
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    whole = []
    with bodies_path(log).open("w", encoding="utf-8") as out:
        store = BodyStore(out)
        for record in (r for r in records if r.get("event") == "request"):
            whole.append(copy.deepcopy(record["body"]))
            record["body_sha256"] = digest(record["body"])
            record["body"] = store.compact(record["body"])
    log.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return whole


def bodies_values(path: Path) -> list[str]:
    with stored.open_text(path) as handle:
        return [json.loads(line)["sha256"] for line in handle if line.strip()]


def scenario_runs(root: Path, names: tuple[str, ...]) -> tuple[dict, dict[str, list[dict]]]:
    run = run_description()
    base = run["scenarios"][0]
    run["scenarios"], bodies = [], {}
    for name in names:
        task_exchange().write(root / name)
        bodies[name] = compact(root / name)
        run["scenarios"].append({**base, "name": name, "artifacts_dir": f"{name}/"})
    return run, bodies


def test_a_report_keeps_each_tool_list_and_each_body_value_once_and_every_request_whole(tmp_path: Path) -> None:
    run, whole = scenario_runs(tmp_path / "artifacts", RUNS)
    written = {name: bodies_values(bodies_path(tmp_path / "artifacts" / name / MODEL_REQUESTS)) for name in RUNS}
    folder = write_report(tmp_path / "reports", run, tmp_path / "artifacts", secrets=SecretScan({}))
    report = load_report(folder)
    jsonschema.validate(report, report_schema())

    # Tool lists: the scenarios name them by digest; the store holds each one once, whole.
    named = [seen["sha256"] for section in report["scenarios"] for seen in section["tool_schemas"]]
    assert len(named) == 2 * len(RUNS) and all("tools" not in seen for s in report["scenarios"]
                                               for seen in s["tool_schemas"])
    assert set(report["store"]["tool_lists"]) == set(named) and len(report["store"]["tool_lists"]) == 1
    assert tool_list(report, named[0]) == PEERWIRE_TOOLS["tools"]

    # Bodies: one run-level store, each value once, none left per scenario run, every value kept.
    artifacts = folder / "artifacts"
    assert not [p for p in artifacts.rglob("*") if ".bodies.jsonl" in p.name]
    kept = bodies_values(artifacts / RUN_BODIES)
    assert len(kept) == len(set(kept)) and set(kept) == {v for values in written.values() for v in values}
    assert len(kept) < sum(len(values) for values in written.values()), "the runs share values"
    listed = {a["path"] for a in report["artifacts"]}
    assert f"artifacts/{stored.stored_name(RUN_BODIES)}" in listed

    # Every request of every log expands to the body that was sent (hash-checked on the way), and every
    # check's citations still resolve.
    for name in RUNS:
        log = artifacts / name / MODEL_REQUESTS
        assert [r["body"] for _, r in read_log(log) if r and r.get("event") == "request"] == whole[name]
        assert not ModelRequestLog.load(log).problems
    assert all(check["evidence_problems"] == [] for s in report["scenarios"] for check in s["checks"])
    assert 'id="schema-' + named[0] + '"' in (folder / "report.html").read_text(encoding="utf-8")


def test_shards_merge_their_stores_into_one(tmp_path: Path) -> None:
    slugs = [f"{name}.attached" for name in RUNS]
    split = plan(slugs, 2)
    folders, whole = [], {}
    for index in (1, 2):
        names = tuple(name for name, slug in zip(RUNS, slugs) if split.assignment[slug] == index)
        run, bodies = scenario_runs(tmp_path / f"artifacts-{index}", names)
        whole.update(bodies)
        run["run_id"] = f"shard-{index}"
        run["shard"] = split.describe(Shard(index, 2), order=slugs)
        folders.append(write_report(tmp_path / f"shard-{index}", run, tmp_path / f"artifacts-{index}",
                                    secrets=SecretScan({})))
    merged = merge_reports(folders, tmp_path / "merged", secrets=SecretScan({}))
    report = merged.report
    assert merged.problems == []
    jsonschema.validate(report, report_schema())
    assert len(report["store"]["tool_lists"]) == 1
    kept = bodies_values(merged.folder / "artifacts" / RUN_BODIES)
    # stored as a written report stores it: compressed (a merge once wrote it plain, 10 times the size)
    assert (merged.folder / "artifacts" / stored.stored_name(RUN_BODIES)).is_file()
    assert not (merged.folder / "artifacts" / RUN_BODIES).exists() or stored.stored_name(RUN_BODIES) == RUN_BODIES
    shard_values = [bodies_values(folder / "artifacts" / RUN_BODIES) for folder in folders]
    assert len(kept) == len(set(kept)) and set(kept) == set().union(*shard_values)
    for section in report["scenarios"]:
        log = merged.folder / section["artifacts_dir"] / MODEL_REQUESTS
        assert [r["body"] for _, r in read_log(log) if r and r.get("event") == "request"] == whole[section["name"]]
        assert all(check["evidence_problems"] == [] for check in section["checks"])


SYSTEM_PROMPT = "You are a coding agent running in a terminal.\n" + "".join(
    f"- Rule {n}: be precise, safe and helpful — “quoted”, naïve, ✓, tab\there.\n" for n in range(120))


def with_system_prompt(artifacts: Path) -> dict[Path, bytes]:
    """Give every rollout under ``artifacts`` a ``session_meta`` holding the system prompt, as Codex writes
    it (compact JSON, UTF-8); returns each rollout's bytes by its path relative to ``artifacts``."""
    written = {}
    for path in sorted(artifacts.rglob("rollout-*.jsonl")):
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        lines[0]["payload"]["base_instructions"] = {"text": SYSTEM_PROMPT}
        data = "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines)
        path.write_text(data, encoding="utf-8")
        written[path.relative_to(artifacts)] = data.encode("utf-8")
    return written


def held(folder: Path, needle: bytes) -> dict[str, int]:
    """How often each file of a report folder holds ``needle``, in the bytes it stores (a ``.gz`` file's
    content), not as a reader expands it."""
    counts = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        if needle in data:
            counts[path.relative_to(folder).as_posix()] = data.count(needle)
    return counts


def test_the_rollouts_system_prompt_is_stored_once_and_every_rollout_reads_back_as_written(tmp_path: Path) -> None:
    run, _ = scenario_runs(tmp_path / "artifacts", RUNS)
    written = with_system_prompt(tmp_path / "artifacts")
    assert len(written) == 2 * len(RUNS)
    folder = write_report(tmp_path / "reports", run, tmp_path / "artifacts", secrets=SecretScan({}))
    report = load_report(folder)
    jsonschema.validate(report, report_schema())

    # Once in the whole folder (JSON-escaped, as every file holds it): in the run-level store, nowhere else.
    prompt = json.dumps(SYSTEM_PROMPT, ensure_ascii=False).encode("utf-8")
    assert held(folder, prompt) == {f"artifacts/{stored.stored_name(RUN_BODIES)}": 1}
    # Each rollout reads back byte for byte, so every citation of a rollout line still holds.
    for relative, data in written.items():
        assert stored.read_bytes(folder / "artifacts" / relative) == data
    assert all(check["evidence_problems"] == [] for s in report["scenarios"] for check in s["checks"])

    # A merge of shards keeps it once too, and its rollouts read back whole.
    shards = []
    for index, names in enumerate((RUNS[:1], RUNS[1:]), 1):
        part, _ = scenario_runs(tmp_path / f"artifacts-{index}", names)
        with_system_prompt(tmp_path / f"artifacts-{index}")
        part["run_id"] = f"shard-{index}"
        shards.append(write_report(tmp_path / f"shard-{index}", part, tmp_path / f"artifacts-{index}",
                                   secrets=SecretScan({})))
    merged = merge_reports(shards, tmp_path / "merged", secrets=SecretScan({}), force=True)
    assert [(stored.cited_name(name), n) for name, n in held(merged.folder, prompt).items()] == [
        (f"artifacts/{RUN_BODIES}", 1)]
    for section in merged.report["scenarios"]:
        for rollout in (merged.folder / section["artifacts_dir"]).rglob("rollout-*"):
            assert prompt in stored.read_bytes(rollout.with_name(stored.cited_name(rollout.name)))


def test_the_pages_hold_shared_parts_once(tmp_path: Path) -> None:
    """What every scenario run shares is held once per page: the sequence pictures' style in report.html; the
    tool list and the artifact manifest stay in report.json (and report.html), report.md names them."""
    run, _ = scenario_runs(tmp_path / "artifacts", RUNS)
    folder = write_report(tmp_path / "reports", run, tmp_path / "artifacts", secrets=SecretScan({}))
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert page.count('<svg class="sequence"') == len(RUNS) and page.count(SEQUENCE_STYLE) == 1
    text = (folder / "report.md").read_text(encoding="utf-8")
    report = load_report(folder)
    assert report["artifacts"] and not any(a["sha256"] in text for a in report["artifacts"])
    assert json.dumps(PEERWIRE_TOOLS["tools"][0]["name"]) not in text
