"""The acceptance driver interface is enough: a second driver, built on the reference's command line alone,
runs real scenarios to the same verdicts as the reference driver."""

from __future__ import annotations

import dataclasses

import ast
import inspect
from pathlib import Path

import pytest

from harness.lab.driver import AcceptanceDriver, CoreRefused, load_driver
from harness.acceptance.execution import RunSettings, run_scenario
from harness.acceptance.progress import Progress
from harness.lab.reference import ReferenceDriver
from harness.acceptance.scenario import discover
from harness.codex.install import locate_codex

from . import cli_driver
from .cli_driver import CliDriver
from tests.patience import WAIT_S

CLI_DRIVER = "tests.acceptance.cli_driver:CliDriver"
METHODS = sorted(name for cls in AcceptanceDriver.__mro__ if cls.__module__.startswith("harness")
                 for name, member in vars(cls).items() if callable(member) and not name.startswith("_"))


def shape(function) -> list[tuple[str, object, bool]]:
    return [(p.name, p.kind, p.default is inspect.Parameter.empty)
            for p in inspect.signature(function).parameters.values() if p.name != "self"]


def test_the_interface_holds_the_provisioner_and_the_live_agent_operations():
    assert {"start", "register", "caller_env", "stop", "attach", "detach", "prompt", "await_turn", "await_change",
            "call_tool", "export", "collect", "server_command", "owner"} <= set(METHODS)


@pytest.mark.parametrize("driver", [ReferenceDriver, CliDriver], ids=lambda d: d.__name__)
@pytest.mark.parametrize("method", METHODS)
def test_each_driver_offers_each_operation_with_the_same_parameters(driver, method):
    assert shape(getattr(driver, method)) == shape(getattr(AcceptanceDriver, method))


def test_the_cli_driver_imports_no_module_of_the_core():
    tree = ast.parse(Path(cli_driver.__file__).read_text(encoding="utf-8"))
    imported = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert not [name for name in imported if name and name.split(".")[0] == "peerwire"]


def test_a_driver_is_named_module_and_class():
    assert load_driver(CLI_DRIVER) is CliDriver
    for wrong in ("tests.acceptance.cli_driver", "no.such.module:X", "tests.acceptance.cli_driver:Nothing"):
        with pytest.raises(ValueError):
            load_driver(wrong)


def test_the_cli_driver_reports_refusals_and_a_missing_home(tmp_path):
    driver = CliDriver(tmp_path)
    assert driver.export() is None  # nothing ever ran here
    driver.start()
    try:
        alice, _bob = driver.register("alice"), driver.register("bob")
        with pytest.raises(CoreRefused) as refused:
            driver.call_tool(alice, "send_message", {"target": "nobody", "message": "hi"}, WAIT_S)
        assert refused.value.code == "unknown_target"
        receipt = driver.call_tool(alice, "followup_task", {"target": "bob", "message": "-- a body\nthat looks odd"}, WAIT_S)
        mark = driver.await_change(None, 0)
        assert driver.await_change(mark, 0) == mark  # nothing committed since
        (task,) = [r for r in driver.export()["records"] if r["record_id"] == receipt["interaction_id"]]
        assert task["body"] == "-- a body\nthat looks odd" and task["tool_receipt"] == {"via": "cli"}
        # A credential, like a cursor or a name, may begin with "-" (one session token in 64 does): it is a
        # value, never taken for an option.
        dashed = dataclasses.replace(alice, token="-" + alice.token[1:])
        with pytest.raises(CoreRefused) as refused:
            driver.call_tool(dashed, "receive_messages", {"cursor": "-not-a-cursor"}, WAIT_S)
        assert refused.value.code == "unknown_caller"
    finally:
        driver.stop()
    assert [r["kind"] for r in driver.export()["records"]] == ["task"]  # read back from the stopped home


SCENARIOS = {scenario.name: scenario for scenario in discover()}


@pytest.mark.codex
@pytest.mark.parametrize("name", ["smoke", "task-reply-auto"])
def test_a_scenario_passes_through_the_cli_driver(name, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    settings = RunSettings(codex=locate_codex(), homes_root=tmp_path / "homes", artifacts_root=tmp_path / "artifacts",
                           driver=CLI_DRIVER)

    result = run_scenario(scenario, "attached", settings, progress=Progress(name, quiet=True))

    failed = {check["id"]: check["summary"] for check in result["checks"] if check["verdict"] != "pass"}
    assert result["passed"] and not failed, failed
    declared = {spec.id for spec in scenario.checks if spec.applies("attached")}
    assert declared <= {check["id"] for check in result["checks"]}
    artifacts = tmp_path / "artifacts" / result["artifacts_dir"]
    assert (artifacts / "core-export.json").is_file() and list((artifacts / "appserver").glob("*.appserver.jsonl"))
