"""Validation that means what it says: a pattern check covers the whole value.

With Python's ``re.match``/``re.search``, ``$`` also matches just before a
final newline, so ``carol\\n`` passed a ``^…$`` name check, and JSON Schema
patterns (checked with ``re.search``) had the same gap. Every validated field
is probed here with a trailing newline, carriage return, NUL and (where a
space may not end it: an id, a cursor, a target that names no one) a space; each
is refused with a specific error, and the registry stays one line per agent. A name
may hold spaces, a final one included, and comes back exactly as registered.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.codex.launch import _toml
from harness.report.writer import ReportError, write_report
from peerwire import collab
from peerwire.codex.capabilities import version_key
from peerwire.control import ControlClient
from peerwire.errors import Code, PeerwireError
from peerwire.home import HOME_ENV
from peerwire.registry_rules import validate_name
from peerwire.schema_pattern import validator_class
from tests.core.conftest import cli
from tests.patience import WAIT_S

ENDINGS = {"newline": "\n", "carriage-return": "\r", "nul": "\x00", "space": " "}
NAME_ENDINGS = {k: v for k, v in ENDINGS.items() if k != "space"}
"""A name may end with a space (spaces are part of the name rule); a control character never."""
CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"


def _refused(code: Code, call) -> PeerwireError:
    with pytest.raises(PeerwireError) as refused:
        call()
    assert refused.value.code == code, refused.value
    return refused.value


@pytest.mark.parametrize("ending", NAME_ENDINGS.values(), ids=NAME_ENDINGS.keys())
def test_a_name_or_alias_with_a_trailing_character_is_refused(ending):
    for what in ("name", "alias"):
        error = _refused(Code.INVALID_ARGUMENT, lambda: validate_name("carol" + ending, what))
        assert error.message.startswith(f"{what} 'carol"), error.message
    assert validate_name("carol jones") == "carol jones", "a space inside a name stays allowed"
    assert validate_name("carol ") == "carol ", "a final space is part of the name, kept exactly"


def test_every_ending_is_refused_by_the_running_app_and_its_cli(core):
    admin = ControlClient(core.home)
    a, b = core.register("a"), core.register("b")
    sender, mailbox = ControlClient(core.home, a.token), ControlClient(core.home, b.token)
    task = sender.call("followup_task", {"target": "b", "message": "do it"})
    page = mailbox.call("receive_messages", {})
    for ending in ENDINGS.values():
        bad = "carol" + ending
        for args in () if ending == " " else (("agent", "register", bad), ("agent", "register", "erin", "--alias", bad)):
            if "\x00" in bad:
                continue  # no command line can carry a NUL
            done = cli(core, *args)
            assert done.returncode == 1 and json.loads(done.stdout)["error"]["code"] == "invalid_argument", done
        if ending != " ":
            _refused(Code.INVALID_ARGUMENT, lambda: admin.call("register_agent", {"name": bad}))
            _refused(Code.INVALID_ARGUMENT, lambda: admin.call("register_agent", {"name": "dave", "aliases": [bad]}))
        _refused(Code.UNKNOWN_TARGET, lambda: sender.call("send_message", {"target": "b" + ending, "message": "x"}))
        _refused(Code.UNKNOWN_REQUEST, lambda: admin.call("trace", {"id": task["request_id"] + ending}))
        _refused(Code.UNKNOWN_INTERACTION, lambda: admin.call("trace", {"id": task["interaction_id"] + ending}))
        _refused(Code.UNKNOWN_REQUEST, lambda: mailbox.call("reply", {"request_id": task["request_id"] + ending,
                                                                      "status": "done", "message": "x"}))
        _refused(Code.CURSOR_INVALID, lambda: mailbox.call("receive_messages", {"cursor": page["cursor"] + ending}))
        _refused(Code.CURSOR_INVALID, lambda: mailbox.call("receive_messages",
                                                           {"ack_cursor": page["cursor"] + ending}))
    names = [agent["name"] for agent in admin.call("agents")["agents"]]
    assert sorted(names) == ["a", "b"], names
    table = _agent_list(core)
    assert len(table) == len(names), table


def _agent_list(core) -> list[str]:
    """The human ``agent list`` (no ``--json``), one line per agent, whatever the names hold."""
    done = subprocess.run([sys.executable, "-m", "peerwire", "agent", "list"], capture_output=True, text=True,
                          env={**os.environ, HOME_ENV: str(core.home.path)}, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("ending", ENDINGS.values(), ids=ENDINGS.keys())
def test_the_core_and_harness_pattern_checks_refuse_every_ending(tmp_path, ending):
    _refused(Code.INVALID_ARGUMENT, lambda: collab.child_path("/root", "worker" + ending))
    with pytest.raises(ValueError, match="not a Codex version"):
        version_key("0.171.0" + ending)
    with pytest.raises(ReportError, match="not a plain folder name"):
        write_report(tmp_path / "out", {"run_id": "run" + ending}, tmp_path)
    assert _toml({"key" + ending: 1}) == "{" + json.dumps("key" + ending) + " = 1}", "a key is quoted, not bare"


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            else:
                yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


ANCHORED = sorted({pattern for path in CONTRACTS.rglob("*.json")
                   for pattern in _patterns(json.loads(path.read_text("utf-8")))
                   if pattern.startswith("^") and pattern.endswith("$")})
"""Every whole-string pattern of the contract: for those, Python's ``re.fullmatch`` means what ECMA-262 does."""


def test_the_contract_has_end_anchored_patterns_to_probe():
    assert len(ANCHORED) >= 10, ANCHORED


@pytest.mark.parametrize("pattern", ANCHORED)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_whole_string_contract_pattern_refuses_a_value_with_a_trailing_character(pattern, data):
    value = data.draw(st.from_regex(pattern, fullmatch=True), label="a value the pattern describes")
    validator = validator_class()({"type": "string", "pattern": pattern})
    assert validator.is_valid(value), value
    for ending in ENDINGS.values():
        whole = re.fullmatch(pattern, value + ending) is not None  # what the pattern says of the longer value
        assert validator.is_valid(value + ending) == whole, (value + ending, "JSON Schema's $ ends the string")
