"""The acceptance driver of peerwire's reference core (:data:`harness.lab.driver.REFERENCE`).

:class:`ReferenceDriver` extends the contract suite's reference provisioner:
``peerwire app`` as a real subprocess (through the run's job when given) and
the app's operator operations over its control socket. :class:`ReferenceLab` is
a lab on this driver with the reference's own instruments beside it (the
control socket, ``trace``, transcript paths), for the reference's adapter tests.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from peerwire import export
from peerwire.control import ControlClient
from peerwire.errors import Code, PeerwireError
from peerwire.home import Home

from harness.lab.live import CodexLab
from harness.contract.interface import Caller
from harness.contract.reference import ReferenceProvisioner
from harness.evidence.layout import ACP_DIR, APPSERVER_DIR, CORE_LOG, transcript_name

from harness.private import copy_private

from .driver import CoreRefused

TRANSCRIPTS = "codex"
"""The folder of a home where the Codex adapter writes each owner's app-server transcript and stderr."""
ACP_TRANSCRIPTS = "acp"
"""The folder of a home where the ACP adapter writes each owner's ACP transcript and stderr."""
ACP_TURN_STATUS = {"end_turn": "completed", "cancelled": "interrupted"}
"""How an ACP prompt's stop reason reads as a turn's end; any other (max_tokens, refusal, an error, an agent that
went away) is a failed turn."""
ATTACH_ACP_WAIT_S = 270.0
"""How long attaching an ACP agent may take: the adapter bounds its start and its session at 120 s each."""


@dataclass
class ReferenceDriver(ReferenceProvisioner):
    agent_kinds: ClassVar[tuple[str, ...]] = ("manual", "codex", "acp")
    source: str = "lab"

    def control(self, caller: Caller | None = None) -> ControlClient:
        """The app's control socket, as the operator or (``caller``) as that agent."""
        return ControlClient(self.home, caller.token if caller is not None else None)

    def _call(self, op: str, args: dict[str, Any] | None = None, *, caller: Caller | None = None,
              wait_s: float = 0.0) -> dict[str, Any]:
        try:
            return self.control(caller).call(op, args, wait_s=wait_s)
        except PeerwireError as error:
            raise CoreRefused(error.to_dict()) from error

    def server_command(self, profile: str) -> list[str]:
        # This interpreter, so Codex launches the same install.
        return [sys.executable, "-m", "peerwire", "mcp", "serve", "--profile", profile]

    def attach(self, caller: Caller, *, codex: str, codex_home: Path, workspace: Path, env: Mapping[str, str],
               resume: bool = False, capabilities: Sequence[str] | None = None,
               listen: Path | None = None) -> dict[str, Any]:
        return self._call("attach_codex", {"agent_id": caller.agent_id, "codex": codex, "codex_home": str(codex_home),
                                           "cwd": str(workspace), "env": dict(env), "resume": resume,
                                           **({"capabilities": list(capabilities)} if capabilities is not None
                                              else {}),
                                           **({"listen": str(listen)} if listen is not None else {})}, wait_s=60)

    def attach_acp(self, caller: Caller, *, command: Sequence[str], cwd: Path, env: Mapping[str, str | None],
                   resume: bool = False) -> dict[str, Any]:
        return self._call("attach_acp", {"agent_id": caller.agent_id, "command": list(command), "cwd": str(cwd),
                                         "session_token": caller.token, "env": dict(env), "resume": resume},
                          wait_s=ATTACH_ACP_WAIT_S)

    def detach(self, caller: Caller) -> dict[str, Any]:
        op = "detach_acp" if caller.provider == "acp" else "detach_codex"
        return self._call(op, {"agent_id": caller.agent_id}, wait_s=30)

    def owner(self, caller: Caller) -> dict[str, Any] | None:
        return next((o for o in self._call("owners")["owners"] if o["agent_id"] == caller.agent_id), None)

    def prompt(self, caller: Caller, text: str) -> str:
        return self._call("prompt", {"agent_id": caller.agent_id, "text": text}, wait_s=30)["turn_id"]

    def await_turn(self, caller: Caller, turn_id: str, timeout_s: float) -> dict[str, Any]:
        out = self._call("await_turn", {"agent_id": caller.agent_id, "turn_id": turn_id,
                                        "timeout_ms": int(timeout_s * 1000)}, wait_s=timeout_s)
        if caller.provider == "acp":
            # An ACP turn ends with the prompt's stop reason; the interface speaks of how a turn ended.
            out = {**out, "stop_reason": out["status"], "status": ACP_TURN_STATUS.get(out["status"], "failed")}
        return out

    def call_tool(self, caller: Caller, tool: str, arguments: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        return self._call(tool, dict(arguments), caller=caller, wait_s=timeout_s)

    def await_change(self, mark: Any, timeout_s: float) -> Any:
        return self._call("await_change", {"mark": mark, "timeout_ms": int(max(0.0, timeout_s) * 1000)},
                          wait_s=timeout_s)["mark"]

    def export(self) -> dict[str, Any] | None:
        if self.app is not None:
            return self._call("export", wait_s=30)
        try:
            return export.of_home(self.home)
        except PeerwireError as error:
            if error.code is Code.HOME_MISSING:
                return None
            raise CoreRefused(error.to_dict()) from error

    def collect(self, destination: Path) -> None:
        copy_private(self.home.log, destination / CORE_LOG)
        for source in sorted((self.home.path / TRANSCRIPTS).glob("*")):
            if source.suffix in (".jsonl", ".log"):
                copy_private(source, destination / APPSERVER_DIR / source.name)
        for source in sorted((self.home.path / ACP_TRANSCRIPTS).glob("*")):
            if source.suffix in (".jsonl", ".log"):
                copy_private(source, destination / ACP_DIR / source.name)

    # -- the reference's own instruments (not part of the driver interface) ----------------

    def trace(self, ident: str) -> dict[str, Any]:
        """Every recorded stage of one interaction or request (``peerwire trace``)."""
        return self._call("trace", {"id": ident})

    def transcript(self, name: str, generation: int = 1) -> Path:
        """Where the adapter writes the app-server transcript of ``name``'s owner ``generation``."""
        return self.home.path / TRANSCRIPTS / transcript_name(name, generation)


class ReferenceLab(CodexLab):
    """A lab on the reference core, with its instruments in reach (see the module docs)."""

    core: ReferenceDriver

    def __init__(self, root: Path, *args: Any, **kwargs: Any):
        super().__init__(root, *args, driver=ReferenceDriver, **kwargs)

    @property
    def home(self) -> Home:
        return self.core.home

    def control(self) -> ControlClient:
        return self.core.control()

    def as_agent(self, name: str) -> ControlClient:
        """Call tools as an agent (what its MCP server does), e.g. to inspect its mailbox."""
        return self.core.control(self.agents[name].caller)

    def trace(self, ident: str) -> dict[str, Any]:
        return self.core.trace(ident)

    def transcript(self, name: str, generation: int = 1) -> Path:
        return self.core.transcript(name, generation)
