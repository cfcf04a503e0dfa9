"""Projecting a run into `$CODEX_HOME/config.toml` and putting the user's file back."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.codex.home import (
    AgentSettings,
    PeerwireEntryConflict,
    PeerwireServer,
    Projection,
    ProjectionError,
    ProjectionInUse,
    ScriptedProvider,
    recover_interrupted,
    render_config,
)
from tests.patience import WAIT_S

ROOT = Path(__file__).resolve().parents[2]
MESSAGING_TOOLS = ("send_message", "followup_task", "receive_messages", "reply")

USER_CONFIG = """\
# my personal settings
model = "gpt-5.5"   # the one I like
model_provider = "openai"
approval_policy = "on-request"

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "0"]  # keep this

[model_providers.openai-proxy]
name = "proxy"
base_url = "https://proxy.invalid/v1"

[projects."/somewhere/else"]
trust_level = "untrusted"

[tui]
notifications = true
"""


def settings(tmp_path: Path, **overrides: object) -> AgentSettings:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    values: dict[str, object] = {
        "workspace": workspace,
        "peerwire": PeerwireServer(
            command="peerwire",
            env={"PEERWIRE_HOME": str(tmp_path / "run-home"), "PEERWIRE_SESSION_ID": "session-a"},
            approve_tools=MESSAGING_TOOLS,
        ),
        "provider": ScriptedProvider(base_url="http://127.0.0.1:9/agents/A/v1"),
    }
    values.update(overrides)
    return AgentSettings(**values)  # type: ignore[arg-type]


def sidecars(codex_home: Path) -> list[str]:
    return sorted(path.name for path in codex_home.iterdir() if path.name != "config.toml")


def test_projection_adds_the_run_and_keeps_every_user_entry(tmp_path: Path) -> None:
    projected = render_config(USER_CONFIG, settings(tmp_path))
    config = tomllib.loads(projected)

    # the user's entries, comments and formatting survive
    for line in ('args = ["--port", "0"]  # keep this', "# my personal settings", "[tui]"):
        assert line in projected
    assert config["mcp_servers"]["docs"] == {"command": "docs-server", "args": ["--port", "0"]}
    assert config["model_providers"]["openai-proxy"]["base_url"] == "https://proxy.invalid/v1"
    assert config["projects"]["/somewhere/else"] == {"trust_level": "untrusted"}
    # the run's provider, server, approvals and trust
    assert (config["model"], config["model_provider"], config["approval_policy"]) == (
        "peerwire-scripted",
        "scripted",
        "never",
    )
    assert config["model_providers"]["scripted"] == {
        "name": "peerwire scripted model",
        "base_url": "http://127.0.0.1:9/agents/A/v1",
        "wire_api": "responses",
        "env_key": "PEERWIRE_SCRIPTED_MODEL_KEY",
        "request_max_retries": 0,
        "stream_max_retries": 0,
    }
    peerwire = config["mcp_servers"]["peerwire"]
    assert peerwire["command"] == "peerwire"
    assert peerwire["args"] == ["mcp", "serve"]
    assert peerwire["env"] == {
        "PEERWIRE_HOME": str(tmp_path / "run-home"),
        "PEERWIRE_SESSION_ID": "session-a",
    }
    assert peerwire["tool_timeout_sec"] == 70
    assert peerwire["tools"] == {tool: {"approval_mode": "approve"} for tool in MESSAGING_TOOLS}
    trusted = [path for path, entry in config["projects"].items() if entry["trust_level"] == "trusted"]
    assert trusted == [str((tmp_path / "workspace").resolve())]


def test_no_tool_is_approved_unless_asked(tmp_path: Path) -> None:
    server = PeerwireServer(command="peerwire", env={"PEERWIRE_HOME": "h", "PEERWIRE_SESSION_ID": "s"})

    config = tomllib.loads(render_config("", settings(tmp_path, peerwire=server)))

    assert "tools" not in config["mcp_servers"]["peerwire"]


def test_real_provider_mode_leaves_the_users_model_settings_alone(tmp_path: Path) -> None:
    config = tomllib.loads(render_config(USER_CONFIG, settings(tmp_path, provider=None)))

    assert (config["model"], config["model_provider"]) == ("gpt-5.5", "openai")
    assert list(config["model_providers"]) == ["openai-proxy"]
    assert "model_reasoning_effort" not in config
    assert config["mcp_servers"]["peerwire"]["command"] == "peerwire"


def test_a_peerwire_entry_pointing_elsewhere_is_reported_and_left_alone(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    original = (
        USER_CONFIG + '\n[mcp_servers.peerwire]\ncommand = "/opt/other/peerwire"\nargs = ["mcp", "serve"]\n'
    )
    (codex_home / "config.toml").write_text(original, encoding="utf-8")

    with pytest.raises(PeerwireEntryConflict) as conflict:
        Projection(codex_home, settings(tmp_path)).apply()

    assert conflict.value.existing == {"command": "/opt/other/peerwire", "args": ["mcp", "serve"]}
    assert conflict.value.wanted["command"] == "peerwire"
    assert (codex_home / "config.toml").read_text(encoding="utf-8") == original
    assert sidecars(codex_home) == []


def test_a_peerwire_entry_with_the_same_launch_is_taken_over(tmp_path: Path) -> None:
    wanted = settings(tmp_path)
    launch = wanted.peerwire.launch()
    env = ", ".join(f'{key} = "{value}"' for key, value in launch["env"].items())
    original = f'[mcp_servers.peerwire]\ncommand = "peerwire"\nargs = ["mcp", "serve"]\nenv = {{{env}}}\ntool_timeout_sec = 5\n'

    config = tomllib.loads(render_config(original, wanted))

    assert config["mcp_servers"]["peerwire"]["tool_timeout_sec"] == 70


def test_invalid_user_toml_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text("model = \n", encoding="utf-8")

    with pytest.raises(ProjectionError, match="not valid TOML"):
        Projection(codex_home, settings(tmp_path)).apply()

    assert sidecars(codex_home) == []


def test_restore_puts_the_original_back_byte_for_byte(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    # CRLF line ends, odd spacing, no final newline: all must come back as they were.
    original = USER_CONFIG.replace("\n", "\r\n").encode("utf-8") + b'[x]\r\ny   =   "\xc3\xa9"'
    config_path = codex_home / "config.toml"
    config_path.write_bytes(original)
    config_path.chmod(0o640)

    with Projection(codex_home, settings(tmp_path)) as projection:
        assert projection.recovered is False
        projected = config_path.read_bytes()
        assert projected != original
        assert tomllib.loads(projected.decode())["mcp_servers"]["peerwire"]["command"] == "peerwire"
        assert sidecars(codex_home) == ["config.toml.peerwire-backup", "config.toml.peerwire-projected",
                                        "config.toml.peerwire-projection"]

    assert config_path.read_bytes() == original
    assert config_path.stat().st_mode & 0o777 == 0o640
    assert sidecars(codex_home) == []


def test_without_an_original_restore_removes_the_file(tmp_path: Path) -> None:
    codex_home = tmp_path / "new-codex-home"

    with Projection(codex_home, settings(tmp_path)):
        assert (codex_home / "config.toml").exists()

    assert list(codex_home.iterdir()) == []


def test_restore_also_happens_when_the_run_fails(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(USER_CONFIG, encoding="utf-8")

    with pytest.raises(RuntimeError), Projection(codex_home, settings(tmp_path)):
        raise RuntimeError("the run blew up")

    assert (codex_home / "config.toml").read_text(encoding="utf-8") == USER_CONFIG


# A process that projects and dies before it can restore (SIGKILL runs no cleanup).
DIE_MID_RUN = """
import os, signal, sys
from harness.codex.home import AgentSettings, PeerwireServer, Projection, ScriptedProvider
settings = AgentSettings(
    workspace=sys.argv[2],
    peerwire=PeerwireServer(command="peerwire", env={"PEERWIRE_HOME": "stale-home", "PEERWIRE_SESSION_ID": "stale"}),
    provider=ScriptedProvider(base_url="http://127.0.0.1:1/agents/A/v1"),
)
Projection(sys.argv[1], settings).apply()
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_an_interrupted_projection_is_recovered_by_the_next_one(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    config_path = codex_home / "config.toml"
    config_path.write_text(USER_CONFIG, encoding="utf-8")
    (tmp_path / "workspace").mkdir()
    died = subprocess.run(
        [sys.executable, "-c", DIE_MID_RUN, str(codex_home), str(tmp_path / "workspace")],
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert died.returncode == -9
    assert "stale-home" in config_path.read_text(encoding="utf-8")

    # Without recovery the stale peerwire entry would be reported as a conflict.
    with Projection(codex_home, settings(tmp_path)) as projection:
        assert projection.recovered is True
        assert "stale-home" not in config_path.read_text(encoding="utf-8")

    assert config_path.read_text(encoding="utf-8") == USER_CONFIG
    assert sidecars(codex_home) == []


def test_a_projection_held_by_a_live_process_is_not_recovered(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    with Projection(codex_home, settings(tmp_path)):
        with pytest.raises(ProjectionInUse):
            recover_interrupted(codex_home)
        with pytest.raises(ProjectionInUse):
            Projection(codex_home, settings(tmp_path)).apply()


def test_a_backup_that_does_not_match_its_marker_is_left_for_inspection(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(USER_CONFIG, encoding="utf-8")
    (codex_home / "config.toml.peerwire-backup").write_text("tampered", encoding="utf-8")
    (codex_home / "config.toml.peerwire-projection").write_text(
        '{"pid": 0, "original": "present", "sha256": "0000"}', encoding="utf-8"
    )

    with pytest.raises(ProjectionError, match="does not match"):
        recover_interrupted(codex_home)

    assert sidecars(codex_home) == ["config.toml.peerwire-backup", "config.toml.peerwire-projection"]
    assert (codex_home / "config.toml").read_text(encoding="utf-8") == USER_CONFIG


# -- restoring key by key: the user's edits during the run survive -------------------------------


def _edit(config_path: Path, old: str, new: str) -> None:
    text = config_path.read_text(encoding="utf-8")
    assert old in text, old
    config_path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_restore_keeps_edits_made_during_the_run_and_undoes_the_rest(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    config_path = codex_home / "config.toml"
    config_path.write_text(USER_CONFIG, encoding="utf-8")

    projection = Projection(codex_home, settings(tmp_path)).apply()
    # The user works on the file while the run holds it: an untouched key, a new server, a new table.
    _edit(config_path, "notifications = true", "notifications = false")
    with config_path.open("a", encoding="utf-8") as out:
        out.write('\n[mcp_servers.lint]\ncommand = "lint"\n\n[history]\npersistence = "none"\n')
    conflicts = projection.restore()

    assert conflicts == []
    text = config_path.read_text(encoding="utf-8")
    config = tomllib.loads(text)
    # What the projection set is back as it was, comments included.
    assert 'model = "gpt-5.5"   # the one I like' in text
    assert (config["model"], config["model_provider"], config["approval_policy"]) == ("gpt-5.5", "openai",
                                                                                       "on-request")
    assert "model_reasoning_effort" not in config and "sandbox_mode" not in config
    assert set(config["mcp_servers"]) == {"docs", "lint"}
    assert list(config["model_providers"]) == ["openai-proxy"]
    assert config["projects"] == {"/somewhere/else": {"trust_level": "untrusted"}}
    # What the user did stays.
    assert config["tui"] == {"notifications": False}
    assert config["history"] == {"persistence": "none"}
    assert config["mcp_servers"]["lint"] == {"command": "lint"}
    assert sidecars(codex_home) == []


def test_an_edit_of_a_projected_value_is_kept_and_reported(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    config_path = codex_home / "config.toml"
    config_path.write_text(USER_CONFIG, encoding="utf-8")

    projection = Projection(codex_home, settings(tmp_path)).apply()
    _edit(config_path, 'approval_policy = "never"', 'approval_policy = "on-failure"')
    _edit(config_path, "tool_timeout_sec = 70", "tool_timeout_sec = 300")
    conflicts = projection.restore()

    assert sorted((c.key, c.original, c.projected, c.current) for c in conflicts) == [
        ("approval_policy", "on-request", "never", "on-failure"),
        ("mcp_servers.peerwire.tool_timeout_sec", None, 70, 300),
    ]
    assert all("kept" in str(c) for c in conflicts)
    config = tomllib.loads(config_path.read_text(encoding="utf-8"))
    assert config["approval_policy"] == "on-failure"
    # The rest of the projected server goes; the one key the user set stays.
    assert config["mcp_servers"]["peerwire"] == {"tool_timeout_sec": 300}
    assert config["model"] == "gpt-5.5"


def test_setting_a_projected_key_back_to_its_original_is_no_conflict(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    config_path = codex_home / "config.toml"
    config_path.write_text(USER_CONFIG, encoding="utf-8")

    projection = Projection(codex_home, settings(tmp_path)).apply()
    _edit(config_path, 'approval_policy = "never"', 'approval_policy = "on-request"')
    assert projection.restore() == []
    assert tomllib.loads(config_path.read_text(encoding="utf-8"))["approval_policy"] == "on-request"


def test_without_an_original_only_the_users_additions_remain(tmp_path: Path) -> None:
    codex_home = tmp_path / "new-codex-home"
    projection = Projection(codex_home, settings(tmp_path)).apply()
    config_path = codex_home / "config.toml"
    with config_path.open("a", encoding="utf-8") as out:
        out.write('\n[tui]\nnotifications = false\n')
    assert projection.restore() == []
    assert tomllib.loads(config_path.read_text(encoding="utf-8")) == {"tui": {"notifications": False}}
    assert sidecars(codex_home) == []


def test_a_file_the_user_broke_during_the_run_is_left_with_the_original_beside_it(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    config_path = codex_home / "config.toml"
    config_path.write_text(USER_CONFIG, encoding="utf-8")

    projection = Projection(codex_home, settings(tmp_path)).apply()
    config_path.write_text("model = \n", encoding="utf-8")  # half-written by an editor
    (conflict,) = projection.restore()

    assert conflict.key == "" and "not valid TOML" in str(conflict)
    assert config_path.read_text(encoding="utf-8") == "model = \n"
    assert sidecars(codex_home) == ["config.toml.peerwire-original"]
    assert (codex_home / "config.toml.peerwire-original").read_text(encoding="utf-8") == USER_CONFIG


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_recovery_after_a_crash_also_keeps_the_users_edits(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    config_path = codex_home / "config.toml"
    config_path.write_text(USER_CONFIG, encoding="utf-8")
    (tmp_path / "workspace").mkdir()
    died = subprocess.run([sys.executable, "-c", DIE_MID_RUN, str(codex_home), str(tmp_path / "workspace")],
                          cwd=ROOT, timeout=WAIT_S)
    assert died.returncode == -9
    _edit(config_path, "notifications = true", "notifications = false")

    assert recover_interrupted(codex_home) is True

    config = tomllib.loads(config_path.read_text(encoding="utf-8"))
    assert config["tui"] == {"notifications": False}
    assert "peerwire" not in config["mcp_servers"] and config["model"] == "gpt-5.5"
    assert sidecars(codex_home) == []


def test_competing_codex_features_are_off_unless_asked_for_and_the_user_gets_them_back(tmp_path: Path) -> None:
    user = USER_CONFIG + "\n[features]\nmulti_agent = true\nundo = true\n"
    config = tomllib.loads(render_config(user, settings(tmp_path)))
    assert config["features"] == {"multi_agent": False, "undo": True} and config["web_search"] == "disabled"
    kept = tomllib.loads(render_config(user, settings(tmp_path, native_tools=("multi_agent", "web_search"))))
    assert kept["features"]["multi_agent"] is True and "web_search" not in kept

    codex_home = tmp_path / "home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(user, encoding="utf-8")
    with Projection(codex_home, settings(tmp_path)):
        assert tomllib.loads((codex_home / "config.toml").read_text())["features"]["multi_agent"] is False
    assert (codex_home / "config.toml").read_text() == user


def test_each_profile_registers_its_server_under_its_own_name(tmp_path: Path) -> None:
    from harness.names import SERVER_NAMES, TOOL_NAMESPACES

    collab = PeerwireServer(command="peerwire", env={}, approve_tools=("spawn_agent",), name=SERVER_NAMES["collab"])
    config = tomllib.loads(render_config("", settings(tmp_path, peerwire=collab)))
    assert list(config["mcp_servers"]) == ["collaboration"]
    assert config["mcp_servers"]["collaboration"]["tools"] == {"spawn_agent": {"approval_mode": "approve"}}
    assert TOOL_NAMESPACES == ("mcp__peerwire", "mcp__collaboration")
    # a user's own entry under that name that launches something else is refused, naming the entry
    with pytest.raises(PeerwireEntryConflict, match=r"\[mcp_servers.collaboration\]"):
        render_config('[mcp_servers.collaboration]\ncommand = "other"\n', settings(tmp_path, peerwire=collab))


def test_the_untrusted_diagnostic_projects_no_trust_for_the_workspace(tmp_path: Path) -> None:
    trusted = tomllib.loads(render_config(USER_CONFIG, settings(tmp_path)))
    untrusted = tomllib.loads(render_config(USER_CONFIG, settings(tmp_path, trust_workspace=False)))
    workspace = os.fspath((tmp_path / "workspace").resolve())
    assert trusted["projects"][workspace] == {"trust_level": "trusted"}
    assert workspace not in untrusted["projects"]
    # the user's own trust decisions are theirs either way
    assert untrusted["projects"]["/somewhere/else"] == {"trust_level": "untrusted"}
    assert {k: v for k, v in untrusted.items() if k != "projects"} == {
        k: v for k, v in trusted.items() if k != "projects"}
