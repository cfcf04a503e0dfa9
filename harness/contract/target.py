"""The implementation under test: its server commands, its provisioner, what the user consents to.

A :class:`Target` launches a server command once per managed caller, with the
environment the provisioner gives that caller added to the suite's own. There
is one command per tool profile it offers: ``messaging`` (``--server-cmd``)
always, ``collab`` (``--collab-server-cmd``) when given, or when the target is
the reference (its server with ``--profile collab``). The provisioner is any
class named ``module:Class`` whose constructor takes one argument, a fresh
directory it owns, and which implements :class:`harness.contract.interface.Provisioner`.

Any MCP stdio server is a target: without a provisioner it offers the
``protocol`` profile alone (JSON-RPC 2.0 and MCP), launched with the suite's
environment. The suite calls none of a foreign server's tools unless the user
consents (:class:`Consent`): a tool may have side effects. A provisioned
target is the implementation's own sandbox, and its messaging tools are what
the suite exists to call.
"""

from __future__ import annotations

import inspect
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from harness.contract.interface import (CAPABILITIES, Caller, Provisioner, adapt, agent_kinds_of, capabilities_of,
                                        load_class)

from .layout import REFERENCE_COLLAB_SERVER_CMD, REFERENCE_PROVISIONER, REFERENCE_SERVER_CMD
from .census import record_launch
from .manifest import PROFILES, PROTOCOL

CALL_TOOLS = ("none", "read-only")
"""--call-tools: no tool of the server is called (the default), or those its tools/list annotates readOnlyHint
(with arguments drawn from their input schema: defaults, examples, the first enum value)."""


class TargetError(ValueError):
    """A server command, provisioner or profile selection that cannot be used."""


def _argv(text: str | Sequence[str], option: str) -> tuple[str, ...]:
    argv = tuple(shlex.split(text)) if isinstance(text, str) else tuple(text)
    if not argv:
        raise TargetError(f"{option} is empty")
    return argv


@dataclass(frozen=True)
class ToolCall:
    """One tools/call the user consented to: a tool name and its arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "ToolCall":
        """``NAME`` or ``NAME {json arguments}`` (the --tool-call option)."""
        name, _, rest = text.strip().partition(" ")
        try:
            arguments = json.loads(rest) if rest.strip() else {}
        except ValueError as exc:
            raise TargetError(f"--tool-call {text!r}: the arguments are not JSON ({exc})") from None
        if not name or not isinstance(arguments, dict):
            raise TargetError(f"--tool-call {text!r}: use NAME or NAME '{{\"arg\": ...}}' (a JSON object)")
        return cls(name, arguments)


@dataclass(frozen=True)
class Consent:
    """Which of the server's own tools the suite may call (a foreign tool may have side effects)."""

    calls: tuple[ToolCall, ...] = ()
    """Exactly these calls (--tool-call)."""
    read_only: bool = False
    """Also the tools tools/list annotates readOnlyHint (--call-tools read-only)."""

    @property
    def granted(self) -> bool:
        return bool(self.calls) or self.read_only

    def describe(self) -> dict[str, Any]:
        return {"calls": [{"name": c.name, "arguments": c.arguments} for c in self.calls],
                "read_only": self.read_only}


OWN_CALLS = (ToolCall("list_agents", {}),)
"""What the suite calls on a provisioned messaging target without being told: its own, inert, tool."""


@dataclass(frozen=True)
class Target:
    server_cmd: tuple[str, ...] = REFERENCE_SERVER_CMD
    provisioner: str | None = REFERENCE_PROVISIONER
    """``None``: no provisioner, so only the protocol profile (any MCP server, the suite's environment)."""
    collab_server_cmd: tuple[str, ...] | None = REFERENCE_COLLAB_SERVER_CMD
    """The collaboration profile's server command; ``None``: the target does not offer the profile."""
    consent: Consent = Consent()

    @classmethod
    def from_options(cls, server_cmd: str | Sequence[str] | None, provisioner: str | None,
                     collab_server_cmd: str | Sequence[str] | None = None, *, call_tools: str | None = None,
                     tool_calls: Sequence[str] = ()) -> "Target":
        """A target from command-line text; ``None`` means the reference.

        A ``server_cmd`` other than the reference's without a ``provisioner`` is
        tested on the protocol profile alone: the reference's provisioner would
        provision peerwire's app behind the other server, and say nothing true of
        either. A custom ``server_cmd`` offers the collab profile only together
        with a ``collab_server_cmd``: the suite never tests one implementation's
        messaging beside another's collaboration.
        """
        argv = _argv(server_cmd, "--server-cmd") if server_cmd else REFERENCE_SERVER_CMD
        if provisioner:
            chosen: str | None = provisioner
        else:
            chosen = REFERENCE_PROVISIONER if argv == REFERENCE_SERVER_CMD else None
        if collab_server_cmd:
            collab: tuple[str, ...] | None = _argv(collab_server_cmd, "--collab-server-cmd")
        else:
            collab = REFERENCE_COLLAB_SERVER_CMD if argv == REFERENCE_SERVER_CMD else None
        if call_tools not in (None, *CALL_TOOLS):
            raise TargetError(f"--call-tools {call_tools!r}: use one of {', '.join(CALL_TOOLS)}")
        consent = Consent(calls=tuple(ToolCall.parse(t) for t in tool_calls), read_only=call_tools == "read-only")
        target = cls(server_cmd=argv, provisioner=chosen, collab_server_cmd=collab if chosen else None,
                     consent=consent)
        if chosen:
            target.provisioner_class()  # fail early on a bad name
        return target

    @property
    def profiles(self) -> tuple[str, ...]:
        """The profiles this target offers, in manifest order: protocol always; the tool profiles with a
        provisioner."""
        if self.provisioner is None:
            return (PROTOCOL,)
        return tuple(p for p in PROFILES if p in (PROTOCOL, "messaging") or self.collab_server_cmd is not None)

    def consented_calls(self) -> tuple[ToolCall, ...]:
        """The calls the suite may make of the server's own tools, beyond read-only ones it discovers: the
        user's, and on a provisioned messaging target its inert own ones."""
        return (*self.consent.calls, *(OWN_CALLS if self.provisioner is not None else ()))

    def offers(self) -> tuple[str, ...]:
        """What a run of this target offers of the requirements' ``needs``."""
        out = []
        if self.consent.granted or self.provisioner is not None:
            out.append("tool-calls")
        if self.provisioner is not None:
            declared = capabilities_of(self.provisioner_class())
            out += [capability for capability in CAPABILITIES if capability in declared]
        return tuple(out)

    def agent_kinds(self) -> tuple[str, ...]:
        """The agent kinds the provisioner registers (none without a provisioner)."""
        return agent_kinds_of(self.provisioner_class()) if self.provisioner is not None else ()

    def server_cmd_for(self, profile: str) -> tuple[str, ...]:
        if profile == "messaging":
            return self.server_cmd
        if profile == "collab" and self.collab_server_cmd is not None:
            return self.collab_server_cmd
        raise TargetError(f"the target offers no {profile} profile")

    def select_profiles(self, requested: Sequence[str] | None) -> tuple[str, ...]:
        """The profiles a run tests: ``requested`` (default: all the target offers), checked."""
        profiles = tuple(requested) if requested else self.profiles
        missing = [p for p in profiles if p not in self.profiles]
        if missing and self.provisioner is None:
            raise TargetError(f"--profiles {','.join(profiles)}: {', '.join(missing)} needs the implementation's "
                              "provisioner (it creates homes, registers callers): pass --provisioner module:Class "
                              "(contracts/README.md shows a complete example); without one only the protocol "
                              "profile runs")
        if missing:
            raise TargetError(f"--profiles {','.join(profiles)}: the target offers no {', '.join(missing)} server "
                              "command; pass --collab-server-cmd, or leave the profile out")
        if "collab" in profiles and not self.registers_collab_roots():
            raise TargetError(f"--provisioner {self.provisioner}: register() takes no collab_root, which the collab "
                              "profile needs; run with --profiles messaging")
        return profiles

    def registers_collab_roots(self) -> bool:
        """Whether the provisioner's ``register`` takes ``collab_root`` (the collab profile needs it)."""
        if self.provisioner is None:
            return False
        try:
            parameters = inspect.signature(self.provisioner_class().register).parameters
        except (TypeError, ValueError):
            return False
        return "collab_root" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())

    def provisioner_class(self) -> type:
        if self.provisioner is None:
            raise TargetError("the target has no provisioner (--provisioner): only the protocol profile runs")
        try:
            return load_class(self.provisioner)
        except ValueError as exc:
            raise TargetError(f"--provisioner {self.provisioner!r}: {exc}") from None

    def new_provisioner(self, root: Path) -> Provisioner:
        """A provisioner owning ``root`` (not started)."""
        root.mkdir(parents=True, exist_ok=True)
        record_launch("home")
        return adapt(self.provisioner_class()(root))

    def server_env(self, extra: dict[str, str]) -> dict[str, str]:
        """The suite's environment plus ``extra`` (a caller's variables win)."""
        return {**os.environ, **extra}

    def bare_env(self, provisioner: Provisioner, caller: Caller) -> dict[str, str]:
        """The suite's environment without any variable the provisioner sets for callers."""
        keys = set(provisioner.caller_env(caller)) | set(provisioner.stranger_env())
        return {k: v for k, v in os.environ.items() if k not in keys}

    def describe(self) -> dict[str, Any]:
        return {"server_cmd": list(self.server_cmd),
                "collab_server_cmd": list(self.collab_server_cmd) if self.collab_server_cmd else None,
                "provisioner": self.provisioner, "profiles": list(self.profiles),
                "consent": self.consent.describe(), "offers": list(self.offers()),
                "agent_kinds": list(self.agent_kinds())}
