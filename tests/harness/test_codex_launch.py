"""An agent's launch settings on the command line, the layered projections, and the route to a real provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.codex.home import (LAUNCH, REGISTRATION, AgentSettings, PeerwireServer, Projection, ProxiedProvider,
                                ScriptedProvider, recover_interrupted, render_config)
from harness.codex.launch import (API_BASE_URL, CHATGPT_BASE_URL, RouteError, cli_overrides, provider_route,
                                  write_launcher)
from tests.patience import WAIT_S


def settings(tmp_path: Path, **overrides: Any) -> AgentSettings:
    # a workspace path with dots and a space: a dotted -c key could not name it
    workspace = tmp_path / "run.1" / "agents" / "B b" / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {
        "workspace": workspace,
        "peerwire": PeerwireServer(command="peerwire", env={"PEERWIRE_HOME": "h", "PEERWIRE_SESSION_ID": "s"},
                                   approve_tools=("send_message",)),
        "provider": ScriptedProvider(base_url="http://127.0.0.1:9/agents/B/v1"),
    }
    values.update(overrides)
    return AgentSettings(**values)


def from_cli(overrides: list[str]) -> dict[str, Any]:
    """What Codex makes of ``-c key=value`` pairs: each value read as TOML at its dotted key, merged."""
    assert overrides[::2] == ["-c"] * (len(overrides) // 2)
    merged: dict[str, Any] = {}
    for pair in overrides[1::2]:
        key, _, value = pair.partition("=")
        node = merged
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = tomllib.loads(f"v = {value}")["v"]
    return merged


@pytest.mark.parametrize("provider", [
    ScriptedProvider(base_url="http://127.0.0.1:9/agents/B/v1"),
    ProxiedProvider(("model_providers", "corp", "base_url"), "http://127.0.0.1:7/agents/B"),
    ProxiedProvider(("openai_base_url",), "http://127.0.0.1:7/agents/B"),
    None,
])
def test_the_command_line_carries_exactly_the_projected_launch_settings(tmp_path: Path, provider) -> None:
    """One list of launch settings: what a background launch's command line says is what an interactive start-up
    projects (from an empty config), the workspace trusted by its exact path."""
    agent = settings(tmp_path, provider=provider)
    projected = tomllib.loads(render_config("", agent, parts=(LAUNCH,)))
    assert from_cli(cli_overrides(agent)) == projected
    assert projected["approval_policy"] == "never" and "mcp_servers" not in projected
    assert projected["projects"] == {os.fspath(Path(agent.workspace).resolve()): {"trust_level": "trusted"}}
    if isinstance(provider, ProxiedProvider):
        assert projected["features"]["enable_request_compression"] is False
    untrusted = settings(tmp_path, provider=provider, trust_workspace=False)
    assert "projects" not in from_cli(cli_overrides(untrusted))


def test_the_registration_alone_holds_no_launch_setting(tmp_path: Path) -> None:
    config = tomllib.loads(render_config("", settings(tmp_path), parts=(REGISTRATION,)))
    assert list(config) == ["mcp_servers"]
    assert config["mcp_servers"]["peerwire"]["tools"] == {"send_message": {"approval_mode": "approve"}}


def test_a_launch_projection_over_the_registration_is_undone_with_the_users_edits_kept(tmp_path: Path) -> None:
    codex_home = tmp_path / "home"
    codex_home.mkdir()
    original = 'model = "mine"\n\n[tui]\ntheme = "dark"\n'
    (codex_home / "config.toml").write_text(original, encoding="utf-8")
    agent = settings(tmp_path)
    registration = Projection(codex_home, agent, parts=(REGISTRATION,)).apply()
    registered = (codex_home / "config.toml").read_text(encoding="utf-8")
    launch = Projection(codex_home, agent, parts=(LAUNCH,)).apply()
    launched = tomllib.loads((codex_home / "config.toml").read_text(encoding="utf-8"))
    assert (launched["model"], launched["approval_policy"]) == ("peerwire-scripted", "never")
    # the user edits their config while the launch projection is on
    edited = (codex_home / "config.toml").read_text(encoding="utf-8").replace('theme = "dark"', 'theme = "light"')
    (codex_home / "config.toml").write_text(edited, encoding="utf-8")
    assert launch.restore() == []
    after = tomllib.loads((codex_home / "config.toml").read_text(encoding="utf-8"))
    assert after["tui"]["theme"] == "light" and after["model"] == "mine"  # their edit kept, our model undone
    assert not {"approval_policy", "model_provider", "projects", "model_providers"} & set(after)
    assert after["mcp_servers"]["peerwire"]["command"] == "peerwire"  # the registration stays for the run
    assert after == tomllib.loads(registered.replace('"dark"', '"light"'))
    registration.restore()
    restored = (codex_home / "config.toml").read_text(encoding="utf-8")
    assert restored.rstrip() == original.replace('"dark"', '"light"').rstrip()
    assert sorted(p.name for p in codex_home.iterdir()) == ["config.toml"]


def test_an_interrupted_launch_projection_is_undone_before_the_registration_under_it(tmp_path: Path) -> None:
    codex_home = tmp_path / "home"
    codex_home.mkdir()
    original = 'model = "mine"\n'
    (codex_home / "config.toml").write_text(original, encoding="utf-8")
    script = f"""
import os, sys
sys.path.insert(0, {os.fspath(Path(__file__).resolve().parents[2])!r})
from pathlib import Path
from harness.codex.home import LAUNCH, REGISTRATION, AgentSettings, PeerwireServer, Projection, ScriptedProvider
agent = AgentSettings(workspace={os.fspath(tmp_path)!r}, peerwire=PeerwireServer(command="stale", env={{}}),
                      provider=ScriptedProvider(base_url="http://127.0.0.1:9/v1"))
Projection({os.fspath(codex_home)!r}, agent, parts=(REGISTRATION,)).apply()
Projection({os.fspath(codex_home)!r}, agent, parts=(LAUNCH,)).apply()
"""  # a process that dies holding both projections
    subprocess.run([sys.executable, "-c", script], check=True, timeout=WAIT_S)
    assert {"config.toml.peerwire-launch-projection", "config.toml.peerwire-projection"} <= {
        p.name for p in codex_home.iterdir()}
    assert recover_interrupted(codex_home) is True
    assert (codex_home / "config.toml").read_text(encoding="utf-8") == original
    assert sorted(p.name for p in codex_home.iterdir()) == ["config.toml"]


def test_the_launcher_runs_codex_with_its_arguments_then_the_settings(tmp_path: Path) -> None:
    fake = tmp_path / "codex"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n", encoding="utf-8")
    fake.chmod(0o700)
    launcher = write_launcher(tmp_path / "codex-launch", fake, ["-c", 'model="m"', "-c", 'projects={"/a.b" = {x = 1}}'])
    out = subprocess.run([str(launcher), "app-server", "--listen", "unix:///s"], capture_output=True, text=True,
                         check=True, timeout=WAIT_S).stdout
    assert json.loads(out) == ["app-server", "--listen", "unix:///s", "-c", 'model="m"', "-c",
                               'projects={"/a.b" = {x = 1}}']


def _home(tmp_path: Path, config: str, auth: dict[str, Any]) -> Path:
    home = tmp_path / "authorized"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    (home / "auth.json").write_text(json.dumps(auth), encoding="utf-8")
    return home


def test_the_route_to_a_provider_of_the_users_own_is_its_base_url(tmp_path: Path) -> None:
    home = _home(tmp_path, 'model_provider = "corp"\n[model_providers.corp]\nbase_url = "https://llm.corp/v1"\n',
                 {"OPENAI_API_KEY": "sk-x"})
    route = provider_route(home)
    assert (route.provider_id, route.upstream, route.key) == ("corp", "https://llm.corp/v1",
                                                             ("model_providers", "corp", "base_url"))
    assert route.through("http://127.0.0.1:5/agents/A") == ProxiedProvider(route.key, "http://127.0.0.1:5/agents/A")


@pytest.mark.parametrize("config, auth, upstream", [
    ('model = "m"\n', {"OPENAI_API_KEY": "sk-x", "tokens": None}, API_BASE_URL),
    ('model = "m"\n', {"OPENAI_API_KEY": None, "tokens": {"access_token": "a", "account_id": "acc"}}, CHATGPT_BASE_URL),
    ('model = "m"\n', {"auth_mode": "chatgpt", "tokens": {"access_token": "a"}}, CHATGPT_BASE_URL),
    ('model = "m"\n', {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-x"}, API_BASE_URL),
    ('openai_base_url = "https://gateway.corp/v1"\n', {"OPENAI_API_KEY": "sk-x"}, "https://gateway.corp/v1"),
])
def test_the_route_to_the_builtin_openai_provider_follows_the_login(tmp_path: Path, config, auth, upstream) -> None:
    route = provider_route(_home(tmp_path, config, auth))
    assert (route.provider_id, route.upstream, route.key) == ("openai", upstream, ("openai_base_url",))


@pytest.mark.parametrize("config, names", [
    ('model_provider = "ollama"\n', "built-in provider other than openai"),
    ('model_provider = "corp"\n[model_providers.corp]\nname = "Corp"\n', "has no base_url"),
    ("model = [", "cannot be read"),
])
def test_a_provider_the_proxy_cannot_stand_before_is_named(tmp_path: Path, config: str, names: str) -> None:
    with pytest.raises(RouteError, match=names):
        provider_route(_home(tmp_path, config, {"OPENAI_API_KEY": "sk-x"}))
