"""The implementation under test: its server commands and its provisioner.

A :class:`Target` launches a server command once per managed caller, with the
environment the provisioner gives that caller added to the suite's own. There
is one command per tool profile it offers: ``messaging`` (``--server-cmd``)
always, ``collab`` (``--collab-server-cmd``) when given, or when the target is
the reference (its server with ``--profile collab``). The provisioner is any
class named ``module:Class`` whose constructor takes one argument, a fresh
directory it owns, and which implements :class:`harness.contract.interface.Provisioner`.
"""

from __future__ import annotations

import inspect
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from harness.contract.interface import Caller, Provisioner, load_class

from .layout import REFERENCE_COLLAB_SERVER_CMD, REFERENCE_PROVISIONER, REFERENCE_SERVER_CMD
from .manifest import PROFILES


class TargetError(ValueError):
    """A server command, provisioner or profile selection that cannot be used."""


def _argv(text: str | Sequence[str], option: str) -> tuple[str, ...]:
    argv = tuple(shlex.split(text)) if isinstance(text, str) else tuple(text)
    if not argv:
        raise TargetError(f"{option} is empty")
    return argv


@dataclass(frozen=True)
class Target:
    server_cmd: tuple[str, ...] = REFERENCE_SERVER_CMD
    provisioner: str = REFERENCE_PROVISIONER
    collab_server_cmd: tuple[str, ...] | None = REFERENCE_COLLAB_SERVER_CMD
    """The collaboration profile's server command; ``None``: the target does not offer the profile."""

    @classmethod
    def from_options(cls, server_cmd: str | Sequence[str] | None, provisioner: str | None,
                     collab_server_cmd: str | Sequence[str] | None = None) -> "Target":
        """A target from command-line text; ``None`` means the reference.

        A ``server_cmd`` other than the reference's needs its own ``provisioner``
        (:class:`TargetError` otherwise): the reference's would provision
        peerwire's app behind the other server. A custom ``server_cmd`` offers
        the collab profile only together with a ``collab_server_cmd``: the suite
        never tests one implementation's messaging beside another's collaboration.
        """
        argv = _argv(server_cmd, "--server-cmd") if server_cmd else REFERENCE_SERVER_CMD
        if argv != REFERENCE_SERVER_CMD and not provisioner:
            # The reference's provisioner would start peerwire's app: the run would test
            # that app through the other server, and say nothing true of either.
            raise TargetError(
                f"--server-cmd {shlex.join(argv)!r} is not the reference server, so the suite needs that "
                "implementation's provisioner (it creates homes, starts the app, registers callers): pass "
                "--provisioner module:Class; contracts/README.md shows a complete example")
        if collab_server_cmd:
            collab: tuple[str, ...] | None = _argv(collab_server_cmd, "--collab-server-cmd")
        else:
            collab = REFERENCE_COLLAB_SERVER_CMD if argv == REFERENCE_SERVER_CMD else None
        target = cls(server_cmd=argv, provisioner=provisioner or REFERENCE_PROVISIONER, collab_server_cmd=collab)
        target.provisioner_class()  # fail early on a bad name
        return target

    @property
    def profiles(self) -> tuple[str, ...]:
        """The tool profiles this target offers, in manifest order."""
        return tuple(p for p in PROFILES if p == "messaging" or self.collab_server_cmd is not None)

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
        if missing:
            raise TargetError(f"--profiles {','.join(profiles)}: the target offers no {', '.join(missing)} server "
                              "command; pass --collab-server-cmd, or leave the profile out")
        if "collab" in profiles and not self.registers_collab_roots():
            raise TargetError(f"--provisioner {self.provisioner}: register() takes no collab_root, which the collab "
                              "profile needs; run with --profiles messaging")
        return profiles

    def registers_collab_roots(self) -> bool:
        """Whether the provisioner's ``register`` takes ``collab_root`` (the collab profile needs it)."""
        try:
            parameters = inspect.signature(self.provisioner_class().register).parameters
        except (TypeError, ValueError):
            return False
        return "collab_root" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())

    def provisioner_class(self) -> type:
        try:
            return load_class(self.provisioner)
        except ValueError as exc:
            raise TargetError(f"--provisioner {self.provisioner!r}: {exc}") from None

    def new_provisioner(self, root: Path) -> Provisioner:
        """A provisioner owning ``root`` (not started)."""
        root.mkdir(parents=True, exist_ok=True)
        return self.provisioner_class()(root)

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
                "provisioner": self.provisioner, "profiles": list(self.profiles)}
