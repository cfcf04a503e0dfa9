"""The evidence export: one versioned document, the same from a running app and from a stopped home.

Its schema (``contracts/export.schema.json``) is what another core provides and
what the harness reads; these tests hold the reference to it, and the schema to
the vocabulary the core declares (kinds, stages, states).
"""

from __future__ import annotations

import contextlib

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from peerwire import export
from peerwire.control import ControlClient
from peerwire.contract import definition_validator, document_validator
from peerwire.errors import Code, PeerwireError
from peerwire.home import Home
from peerwire.lifecycle import BINDING, LIFECYCLES, Claimant, Kind, Stage
from peerwire.schema import MIGRATIONS
from peerwire.store import Store

from .conftest import call, cli
from tests.patience import WAIT_S

EXPORT_ONLY = ("state", "tool_receipt", "updated_at", "received_at")


def schema() -> dict:
    return document_validator("export.schema.json").schema


def violations(document: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in document_validator("export.schema.json").iter_errors(document)]


def busy_store(path: Path) -> tuple[Store, dict]:
    """A store holding every kind of record, both claimants, every binding end and a notice."""
    store = Store(path)
    a, _ = store.registry.register_agent("A", "codex", aliases=["alpha"])
    b, _ = store.registry.register_agent("B", "codex")
    root, _ = store.registry.register_agent("lead", "codex", path="/root")
    store.registry.register_agent("/root/w", "codex", path="/root/w", parent_agent_id=root.agent_id,
                                  source="spawn_agent")
    ids = {"info": store.mailbox.admit_information(a, b, "fyi: ünïcode\nand lines",
                                                   receipt={"via": "mcp", "call_id": "call_1", "thread_id": "t-a",
                                                            "turn_id": "u-a", "model": "m"})["interaction_id"]}
    received = store.mailbox.receive(b, limit=10)
    ids["as_read"] = received.records[0]
    store.mailbox.receive(b, ack_cursor=received.cursor, limit=1)
    manual = store.mailbox.admit_task(a, b, "by hand", receipt={"via": "cli"})["request_id"]
    store.mailbox.receive(b, limit=10)  # claimed by receive
    store.mailbox.admit_reply(b, manual, "done", "handled")
    published = store.mailbox.admit_task(a, b, "auto")["request_id"]
    claim = store.mailbox.claim_for_dispatch(published)
    binding = store.bindings.bind(published, claim, b, 1, "t-b", "u-b", via="turn/start")
    store.bindings.capture_outcome(binding, {"turn_id": "u-b", "turn_status": "completed", "reply_status": "done",
                                             "text": "the answer", "attributed_to_recipient": True, "code": None})
    store.bindings.publish_outcome(binding, b, "done", "the answer")
    lost = store.mailbox.admit_task(a, b, "lost")["request_id"]
    store.bindings.bind(lost, store.mailbox.claim_for_dispatch(lost), b, 1, "t-b", "u-c", via="turn/steer")
    store.bindings.make_uncertain(lost, "owner exited", binding_id=store.bindings.find(turn_id="u-c")[0]["binding_id"])
    released = store.mailbox.admit_task(a, b, "stale")["request_id"]
    store.mailbox.claim_for_dispatch(released)
    store.mailbox.release_claim(released, "stale turn")
    store.mailbox.transition(ids["info"], "provider_visible", {"via": "thread/inject_items", "thread_id": "t-b"})
    ids.update(manual=manual, published=published, lost=lost, released=released)
    return store, ids


def test_an_export_of_every_kind_of_fact_validates_and_keeps_the_recipients_records(tmp_path):
    store, ids = busy_store(tmp_path / "db")
    document = export.of_store(store)
    assert violations(document) == []
    assert (document["format"], document["version"], document["source"]) == ("peerwire-export", 1, "app")
    record = definition_validator("record")
    for row in document["records"]:
        assert list(record.iter_errors({k: v for k, v in row.items() if k not in EXPORT_ONLY})) == []
    assert [r["seq"] for r in document["records"]] == sorted(r["seq"] for r in document["records"])
    assert [e["evidence_id"] for e in document["evidence"]] == sorted(e["evidence_id"] for e in document["evidence"])
    assert {r["kind"] for r in document["records"]} == set(Kind)
    assert {c["claimant"] for c in document["claims"]} == set(Claimant)
    assert {b["state"] for b in document["bindings"]} == {"published", "uncertain"}
    info = next(r for r in document["records"] if r["record_id"] == ids["info"])
    assert info["body"] == "fyi: ünïcode\nand lines" and info["state"] == "provider_visible"
    assert info["tool_receipt"] == {"via": "mcp", "call_id": "call_1", "thread_id": "t-a", "turn_id": "u-a",
                                    "model": "m"}
    assert info["received_at"] is not None
    # what a recipient read is exactly the export's record without its mutable parts
    assert ids["as_read"] == {k: v for k, v in info.items() if k not in EXPORT_ONLY}
    agents = {a["name"]: a for a in document["agents"]}
    assert agents["A"]["aliases"] == ["alpha"] and agents["/root/w"]["parent_agent_id"] == agents["lead"]["agent_id"]
    assert not any("token" in key for a in document["agents"] for key in a)
    store.close()


def test_the_schema_names_exactly_the_kinds_stages_and_states_the_core_declares():
    defs = schema()["$defs"]
    assert set(defs["kind"]["enum"]) == set(Kind)
    assert set(defs["stage"]["enum"]) == set(Stage)
    assert set(defs["claim"]["properties"]["claimant"]["enum"]) == set(Claimant)
    assert set(defs["binding"]["properties"]["state"]["enum"]) == BINDING.states
    per_kind = {rule["if"]["properties"]["kind"]["const"]: set(rule["then"]["properties"]["state"]["enum"])
                for rule in defs["record"]["allOf"]}
    assert per_kind == {kind: lifecycle.states for kind, lifecycle in LIFECYCLES.items()}
    every_stage = {lc.stage(event) for lc in [*LIFECYCLES.values(), BINDING] for event in lc.events}
    assert every_stage <= set(Stage)


def test_every_stage_the_busy_store_writes_is_declared(tmp_path):
    store, _ = busy_store(tmp_path / "db")
    written = {e["stage"] for e in export.of_store(store)["evidence"]}
    assert written <= set(Stage)
    assert {Stage.CLAIM_BY_RECEIVE, Stage.CLAIM_BY_DISPATCH, Stage.RELEASE, Stage.BINDING_PUBLISH,
            Stage.BINDING_OBSERVATION_LOST, Stage.ACKNOWLEDGED} <= written
    store.close()


def test_a_stopped_home_exports_read_only_the_same_facts(tmp_path):
    home = Home(tmp_path / "home")
    home.create()
    store, _ = busy_store(home.db)
    live = export.of_store(store)
    store.close()
    before = hashlib.sha256(home.db.read_bytes()).hexdigest()
    stopped = export.of_home(home)
    assert hashlib.sha256(home.db.read_bytes()).hexdigest() == before
    assert stopped["source"] == "home" and violations(stopped) == []
    strip = ("exported_at", "source")
    assert {k: v for k, v in stopped.items() if k not in strip} == {k: v for k, v in live.items() if k not in strip}


def test_an_older_store_is_exported_as_it_is_without_migrating(tmp_path):
    home = Home(tmp_path / "home")
    home.create()
    db = sqlite3.connect(home.db, isolation_level=None)
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO agents(agent_id, identity_key, name, provider, node_id, status, source, created_at, "
               "updated_at) VALUES ('a1', 'a1', 'old', 'manual', 'n', 'registered', 'cli', "
               "'2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')")
    db.close()
    document = export.of_home(home)
    assert violations(document) == []
    assert document["core"]["store_schema"] == 1
    assert [(a["name"], a["path"], a["parent_agent_id"]) for a in document["agents"]] == [("old", None, None)]
    assert sqlite3.connect(home.db).execute("PRAGMA user_version").fetchone()[0] == 1


@pytest.mark.parametrize("what", ["no home", "no store", "newer store", "not a store"])
def test_an_unreadable_home_is_a_clear_error(tmp_path, what):
    home = Home(tmp_path / "home")
    if what != "no home":
        home.create()
    if what == "newer store":
        home.open_store().close()
        with contextlib.closing(sqlite3.connect(home.db)) as db:
            db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    if what == "not a store":
        home.db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(PeerwireError) as info:
        export.of_home(home)
    expected = {"no home": (Code.HOME_MISSING, "no home at"), "no store": (Code.HOME_MISSING, "holds no store"),
                "newer store": (Code.STORE_DAMAGED, "newer peerwire"),
                "not a store": (Code.STORE_DAMAGED, "not a SQLite database")}[what]
    assert (info.value.code, expected[1] in info.value.message) == (expected[0], True)


def test_the_export_op_and_the_cli_give_the_same_document_running_and_stopped(core, tmp_path):
    alice = core.register("alice")
    bob = core.register("bob")
    receipt = call(core, alice, "followup_task", {"target": "bob", "message": "count"})
    call(core, bob, "reply", {"request_id": receipt["request_id"], "status": "done", "message": "7"})
    by_op = ControlClient(core.home).call("export")  # the operator's: an agent's token does not export
    assert violations(by_op) == [] and by_op["source"] == "app"
    by_cli = json.loads(cli(core, "export").stdout)
    assert by_cli["source"] == "app" and by_cli["records"] == by_op["records"]
    core.stop()
    out = tmp_path / "export.json"
    done = cli(core, "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    stopped = json.loads(out.read_text(encoding="utf-8"))
    assert out.stat().st_mode & 0o777 == 0o600
    assert stopped["source"] == "home" and violations(stopped) == []
    assert stopped["records"] == by_op["records"] and stopped["evidence"] == by_op["evidence"]
    assert [r["kind"] for r in stopped["records"]] == ["task", "reply"]


def test_the_cli_names_a_missing_home(tmp_path):
    done = subprocess.run([sys.executable, "-m", "peerwire", "export", "--home", str(tmp_path / "nowhere"), "--json"],
                          capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["code"] == "home_missing"
    assert not (tmp_path / "nowhere").exists()  # reading never creates a home
