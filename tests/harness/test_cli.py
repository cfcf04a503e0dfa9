"""``peerwire-harness`` (:mod:`harness.cli`) and its checkout shim ``runner.py``: one dispatcher."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

from harness import cli
from tests.patience import WAIT_S

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    """Every command dispatched to a stand-in module that records its arguments instead of running."""
    calls: list[tuple[str, list[str]]] = []
    for command in cli.COMMANDS:
        module = types.ModuleType(f"stand_in_{command}")
        module.main = lambda argv, command=command: calls.append((command, list(argv))) or 0
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setitem(cli.COMMANDS, command, (module.__name__, cli.COMMANDS[command][1]))
    return calls


def test_every_command_names_a_module_with_a_main() -> None:
    for command, (module, _summary) in cli.COMMANDS.items():
        assert callable(importlib.import_module(module).main), command


def test_the_console_script_and_the_extras_it_names_are_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["peerwire-harness"] == "harness.cli:main"
    assert set(cli.EXTRAS.values()) <= set(project["optional-dependencies"])
    assert set(cli.EXTRAS) <= set(cli.COMMANDS)


def test_a_command_gets_the_arguments_after_its_name(recorder) -> None:
    assert cli.main(["contract", "--server-cmd", "srv", "--", "-x"]) == 0
    assert cli.main(["pins", "suite"]) == 0
    assert recorder == [("contract", ["--server-cmd", "srv", "--", "-x"]), ("pins", ["suite"])]


def test_without_a_default_no_command_or_an_unknown_one_is_a_usage_error(recorder, capsys) -> None:
    assert cli.main([]) == 2
    assert "usage: peerwire-harness COMMAND" in capsys.readouterr().err
    assert cli.main(["--scenario", "smoke"]) == 2
    assert "unknown command '--scenario'" in capsys.readouterr().err
    assert recorder == []


def test_with_a_default_other_arguments_go_to_it(recorder) -> None:
    assert cli.main(["--scenario", "smoke"], default="accept") == 0
    assert cli.main([], default="accept") == 0
    assert cli.main(["report", "r"], default="accept") == 0
    assert recorder == [("accept", ["--scenario", "smoke"]), ("accept", []), ("report", ["r"])]


def test_help_lists_every_command(capsys) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {command} " in out for command in cli.COMMANDS)


@pytest.mark.parametrize(("missing", "command", "extra"), [("pytest", "contract", "suite"),
                                                           ("psutil", "accept", "accept"),
                                                           ("tomlkit.items", "drift", "accept")])
def test_a_missing_dependency_names_the_extra_to_install(recorder, capsys, missing, command, extra) -> None:
    def main(argv):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    sys.modules[cli.COMMANDS[command][0]].main = main
    assert cli.main([command]) == 2
    err = capsys.readouterr().err
    assert f"pip install 'peerwire[{extra}]'" in err and repr(missing.partition(".")[0]) in err


@pytest.mark.parametrize("missing", ["harness.acceptance.gone", "peerwire.gone", None])
def test_a_missing_module_of_our_own_is_a_bug_not_an_extra(recorder, missing) -> None:
    def main(argv):
        raise ModuleNotFoundError("gone", name=missing)

    sys.modules[cli.COMMANDS["accept"][0]].main = main
    with pytest.raises(ModuleNotFoundError):
        cli.main(["accept"])


def test_runner_py_is_the_same_dispatcher() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "runner.py"), "--help"], capture_output=True, text=True,
                          timeout=WAIT_S, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python runner.py COMMAND")
    assert all(f"  {command} " in done.stdout for command in cli.COMMANDS)
    assert "Without a command, the arguments go to `accept`" in done.stdout
