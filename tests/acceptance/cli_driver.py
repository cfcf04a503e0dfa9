"""A second acceptance driver: the reference core through its command line only.

It proves the driver interface (:mod:`harness.lab.driver`) is enough to run
the acceptance suite: every operation is a ``peerwire ... --json`` command, the
app a subprocess of its own, the core's files copied by the layout its home
documents. It imports no peerwire module (a test checks): it knows the reference
core the way another core's maintainer knows theirs, by its commands and their
JSON.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, Mapping, Sequence

from harness.lab.driver import CoreRefused
from harness.contract.interface import Caller
from harness.process.jobs import Spawn
from tests.patience import WAIT_S

PEERWIRE = str(Path(sys.executable).with_name("peerwire"))
"""The reference's command line, installed beside this interpreter."""
# Safety nets only (tests/patience.py): a healthy command answers in seconds.
READY_S = STOP_S = COMMAND_GRACE_S = WAIT_S
_ACP_TOKEN = "PEERWIRE_ACP_AGENT_TOKEN"

# The tools and the commands that call them as the caller (each takes its body on stdin).
_TOOL_COMMANDS = {
    "send_message": lambda a: (["send", f"--to={a['target']}", "--stdin"], a["message"]),
    "followup_task": lambda a: (["task", f"--to={a['target']}", "--stdin"], a["message"]),
    "reply": lambda a: (["reply", a["request_id"], f"--status={a['status']}", "--stdin"], a["message"]),
    "interrupt_agent": lambda a: (["interrupt", a["target"]], None),
    "list_agents": lambda a: (["peers", *_flag("--prefix", a.get("name_prefix"))], None),
    "wait_agent": lambda a: (["message", "wait", *_flag("--timeout-ms", a.get("timeout_ms"))], None),
    "receive_messages": lambda a: (["message", "receive", *_flag("--cursor", a.get("cursor")),
                                    *_flag("--ack", a.get("ack_cursor")), *_flag("--limit", a.get("limit")),
                                    *_flag("--timeout-ms", a.get("timeout_ms"))], None),
}


def _flag(name: str, value: Any) -> list[str]:
    # One argument, --flag=value: a value may begin with "-" (a token, a cursor, a name).
    return [] if value is None else [f"{name}={value}"]


@dataclass
class CliDriver:
    capabilities: ClassVar[frozenset[str]] = frozenset({"unavailable"})
    agent_kinds: ClassVar[tuple[str, ...]] = ("manual", "codex", "acp")
    root: Path
    env: Mapping[str, str] | None = None
    spawn: Spawn | None = None
    app: subprocess.Popen | None = None
    callers: list[Caller] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    # -- the provisioner --------------------------------------------------------------------

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        argv = [PEERWIRE, "app", "--home", str(self.home)]
        env = {**os.environ, **(self.env or {})}
        with open(self.root / "app.stderr.log", "ab") as stderr:
            if self.spawn is not None:
                self.app = self.spawn(argv, env, stderr)
            else:
                self.app = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                            env=env, start_new_session=True)
        line = _first_line(self.app, READY_S)
        if json.loads(line or "{}").get("event") != "ready":
            self._end(signal.SIGKILL)
            raise RuntimeError(f"peerwire app was not ready: {line!r}")

    def register(self, name: str, *, provider: str = "manual", aliases: tuple[str, ...] = (),
                 collab_root: bool = False) -> Caller:
        if collab_root and provider == "manual":
            provider = "codex"  # a tree's root is a Codex agent: only Codex has native collaboration
        args = ["agent", "register", name, "--provider", provider, *[f"--alias={a}" for a in aliases]]
        out = self._run(*args, *(["--collab-root"] if collab_root else []))
        caller = Caller(name, out["agent"]["agent_id"], out["session_token"], provider, tuple(aliases))
        self.callers.append(caller)
        return caller

    def caller_env(self, caller: Caller) -> dict[str, str]:
        return {"PEERWIRE_HOME": str(self.home), "PEERWIRE_SESSION_ID": caller.token}

    def stranger_env(self) -> dict[str, str]:
        return {"PEERWIRE_HOME": str(self.home), "PEERWIRE_SESSION_ID": secrets.token_urlsafe(32)}

    def crash(self, server_pids: Sequence[int]) -> None:
        # The app is the one process that writes: SIGKILL it and start it again on the same home.
        self._end(signal.SIGKILL)
        self.start()

    def make_unavailable(self) -> None:
        self._end(signal.SIGTERM)

    def make_available(self) -> None:
        self.start()

    def stop(self) -> None:
        self._end(signal.SIGTERM)

    # -- live agents ------------------------------------------------------------------------

    def server_command(self, profile: str) -> list[str]:
        return [PEERWIRE, "mcp", "serve", "--profile", profile]

    def attach(self, caller: Caller, *, codex: str, codex_home: Path, workspace: Path, env: Mapping[str, str],
               resume: bool = False, capabilities: Sequence[str] | None = None,
               listen: Path | None = None) -> dict[str, Any]:
        return self._run("agent", "attach", caller.agent_id, "--codex-home", str(codex_home), "--cwd", str(workspace),
                         "--codex", codex, *(["--resume"] if resume else []),
                         *([f"--listen={listen}"] if listen is not None else []),
                         *([f"--capabilities={','.join(capabilities)}"] if capabilities is not None else []),
                         *[f"--env={name}={value}" for name, value in env.items()], wait_s=WAIT_S)

    def attach_acp(self, caller: Caller, *, command: Sequence[str], cwd: Path, env: Mapping[str, str | None],
                   resume: bool = False) -> dict[str, Any]:
        # The agent's credential goes to its MCP server only: through a variable, never on the command line.
        return self._run("agent", "attach-acp", caller.agent_id, f"--cwd={cwd}", f"--session-token-env={_ACP_TOKEN}",
                         *[f"--env={name}={value}" for name, value in env.items() if value is not None],
                         *[f"--unset={name}" for name, value in env.items() if value is None],
                         *(["--resume"] if resume else []), "--", *command,
                         wait_s=WAIT_S, extra_env={_ACP_TOKEN: caller.token})

    def detach(self, caller: Caller) -> dict[str, Any]:
        return self._run("agent", "detach", caller.agent_id, wait_s=WAIT_S)

    def owner(self, caller: Caller) -> dict[str, Any] | None:
        return next((o for o in self._run("agent", "owners")["owners"] if o["agent_id"] == caller.agent_id), None)

    def prompt(self, caller: Caller, text: str) -> str:
        return self._run("prompt", caller.agent_id, "--stdin", stdin=text, wait_s=WAIT_S)["turn_id"]

    def await_turn(self, caller: Caller, turn_id: str, timeout_s: float) -> dict[str, Any]:
        out = self._run("agent", "await-turn", caller.agent_id, turn_id, "--wait", str(timeout_s), wait_s=timeout_s)
        if caller.provider == "acp":  # a prompt's stop reason, as the interface's turn status
            out = {**out, "stop_reason": out["status"],
                   "status": {"end_turn": "completed", "cancelled": "interrupted"}.get(out["status"], "failed")}
        return out

    def call_tool(self, caller: Caller, tool: str, arguments: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        if tool not in _TOOL_COMMANDS:
            raise ValueError(f"the reference's command line has no command for {tool}")
        args, body = _TOOL_COMMANDS[tool](arguments)
        # Every value goes as --flag=value: a token, a cursor or a name may begin with "-".
        return self._run(*args, f"--session={caller.token}", stdin=body, wait_s=timeout_s)

    def await_change(self, mark: Any, timeout_s: float) -> Any:
        return self._run("await-change", *_flag("--mark", mark), "--wait", str(max(0.0, timeout_s)),
                         wait_s=timeout_s)["mark"]

    def export(self) -> dict[str, Any] | None:
        try:
            return self._run("export", wait_s=WAIT_S)
        except CoreRefused as refused:
            if refused.code == "home_missing":
                return None
            raise

    def collect(self, destination: Path) -> None:
        # The reference's home: app.log, and codex/<agent>.g<n>.appserver.jsonl (+ .stderr.log) per owner.
        _copy(self.home / "app.log", destination / "core" / "app.log")
        for source in sorted((self.home / "codex").glob("*")):
            if source.suffix in (".jsonl", ".log"):
                _copy(source, destination / "appserver" / source.name)
        for source in sorted((self.home / "acp").glob("*")):  # an ACP owner's: acp/<agent>.g<n>.acp.jsonl
            if source.suffix in (".jsonl", ".log"):
                _copy(source, destination / "acp" / source.name)

    # -- the command line -------------------------------------------------------------------

    def _run(self, *args: str, stdin: str | None = None, wait_s: float = 0.0,
             extra_env: Mapping[str, str] | None = None) -> dict[str, Any]:
        # Options go before a trailing "-- COMMAND" (attach-acp's): --home and --json are the command line's.
        split = args.index("--") if "--" in args else len(args)
        argv = [PEERWIRE, *args[:split], "--home", str(self.home), "--json", *args[split:]]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PEERWIRE_")}
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=wait_s + COMMAND_GRACE_S,
                              env={**env, **(extra_env or {})})
        try:
            out = json.loads(done.stdout)
        except ValueError:
            raise RuntimeError(f"peerwire {' '.join(args[:2])} printed no JSON (status {done.returncode}): "
                               f"{done.stderr[-500:]}") from None
        if done.returncode != 0:
            raise CoreRefused(out["error"])
        return out

    def _end(self, sig: signal.Signals) -> None:
        if self.app is None:
            return
        if self.app.poll() is None:
            self.app.send_signal(sig)
            try:
                self.app.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self.app.kill()
                self.app.wait()
        if self.app.stdout is not None:
            self.app.stdout.close()
        self.app = None


def _first_line(process: subprocess.Popen, timeout_s: float) -> str:
    stdout: IO[bytes] | None = process.stdout
    assert stdout is not None
    deadline, buf = time.monotonic() + timeout_s, b""
    while b"\n" not in buf and (remaining := deadline - time.monotonic()) > 0:
        if not select.select([stdout], [], [], remaining)[0]:
            break
        chunk = os.read(stdout.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n", 1)[0].decode(errors="replace")


def _copy(source: Path, target: Path) -> None:
    if source.is_file():
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        os.chmod(target, 0o600)
