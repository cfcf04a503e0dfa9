"""The npm packages peerwire runs: the pins it ships, and where it looks for their installs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import npm
from harness.cli import main as harness_cli
from harness.contract.interop import clients

ROOT = Path(__file__).resolve().parents[2]


def install(node_modules: Path, package: str, version: str) -> Path:
    """A stand-in install of ``package`` at ``version``: its package.json is what the lookup reads."""
    folder = node_modules / package
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": package, "version": version}))
    return node_modules


def test_the_shipped_pins_are_the_checkouts_package_json() -> None:
    """npm ci installs package.json's pins, the installed package asks for npm-pins.json's: one bump, both files.
    (package.json may pin more: servers only the project's own tests run.)"""
    manifest = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["dependencies"]
    assert {p: manifest.get(p) for p in npm.pins()} == npm.pins(), (
        "harness/npm-pins.json must pin what package.json pins: change both together")
    lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    assert {p: lock["packages"][f"node_modules/{p}"]["version"] for p in npm.pins()} == npm.pins()
    assert set(npm.pins()) == {npm.CODEX, npm.TS_SDK, npm.INSPECTOR}, "every package peerwire runs, nothing else"


def test_every_use_names_pinned_packages() -> None:
    assert set(npm.GROUPS["all"]) == set(npm.pins())
    assert set(npm.GROUPS["suite"]) | set(npm.GROUPS["accept"]) == set(npm.GROUPS["all"])
    assert npm.install_hint(npm.GROUPS["accept"]) == f"npm install @openai/codex@{npm.pin('@openai/codex')}"


@pytest.mark.parametrize("use", sorted(npm.GROUPS))
def test_the_pins_command_prints_one_spec_a_line(use: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert harness_cli(["pins", use]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{p}@{npm.pin(p)}" for p in npm.GROUPS[use]]


def test_the_variable_is_the_only_place_looked_at_when_set(tmp_path: Path) -> None:
    chosen = tmp_path / "chosen"
    install(tmp_path / "node_modules", npm.TS_SDK, "1.0.0")
    assert npm.search_path({npm.NODE_MODULES_ENV: str(chosen)}, cwd=tmp_path, prefix=tmp_path / "venv") == [chosen]
    assert npm.find(npm.TS_SDK, {npm.NODE_MODULES_ENV: str(chosen)}, cwd=tmp_path) is None


def test_the_current_project_comes_first_then_the_python_environments(tmp_path: Path) -> None:
    project, venv_project = tmp_path / "work" / "project", tmp_path / "tools"
    path = npm.search_path({}, cwd=project / "src", prefix=venv_project / ".venv")
    assert path[:3] == [project / "src" / "node_modules", project / "node_modules", tmp_path / "work" / "node_modules"]
    assert path.index(venv_project / "node_modules") > path.index(Path(path[0].anchor) / "node_modules")
    assert len(path) == len(set(path)), "a folder is looked at once"


def test_the_nearest_folder_holding_the_package_wins(tmp_path: Path) -> None:
    install(tmp_path / "node_modules", npm.TS_SDK, "1.0.0")
    (tmp_path / "project" / "node_modules").mkdir(parents=True)  # nearer, but without the package
    install(tmp_path / "venv-home" / "node_modules", npm.INSPECTOR, "2.0.0")
    where = {"cwd": tmp_path / "project", "prefix": tmp_path / "venv-home" / ".venv"}
    assert npm.find(npm.TS_SDK, {}, **where) == tmp_path / "node_modules"
    assert npm.find(npm.INSPECTOR, {}, **where) == tmp_path / "venv-home" / "node_modules"
    assert npm.find(npm.CODEX, {}, **where) is None


def test_a_missing_client_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(npm.NODE_MODULES_ENV, str(tmp_path))
    with pytest.raises(clients.ClientMissing) as missing:
        clients.node_modules(npm.TS_SDK)
    assert npm.install_hint(npm.GROUPS["suite"]) in str(missing.value)
    assert f"{npm.NODE_MODULES_ENV}={tmp_path}" in str(missing.value)


def test_a_client_at_another_version_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, npm.INSPECTOR, "0.0.1")
    monkeypatch.setenv(npm.NODE_MODULES_ENV, str(tmp_path))
    with pytest.raises(clients.ClientMissing, match=r"0\.0\.1 is installed .* pins") as refused:
        clients.node_modules(npm.INSPECTOR)
    assert npm.spec(npm.INSPECTOR) in str(refused.value)
    install(tmp_path / "ok", npm.INSPECTOR, npm.pin(npm.INSPECTOR))
    monkeypatch.setenv(npm.NODE_MODULES_ENV, str(tmp_path / "ok"))
    assert clients.node_modules(npm.INSPECTOR) == tmp_path / "ok"
