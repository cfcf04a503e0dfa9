"""The implementation under test: its server command and its provisioner.

A :class:`Target` launches the server command once per managed caller, with the
environment the provisioner gives that caller added to the suite's own. The
provisioner is any class named ``module:Class`` whose constructor takes one
argument, a fresh directory it owns, and which implements
:class:`harness.provisioner.Provisioner`.
"""

from __future__ import annotations

import importlib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from harness.provisioner import Caller, Provisioner

from .layout import REFERENCE_PROVISIONER, REFERENCE_SERVER_CMD


class TargetError(ValueError):
    """A server command or provisioner name that cannot be used."""


@dataclass(frozen=True)
class Target:
    server_cmd: tuple[str, ...] = REFERENCE_SERVER_CMD
    provisioner: str = REFERENCE_PROVISIONER

    @classmethod
    def from_options(cls, server_cmd: str | Sequence[str] | None, provisioner: str | None) -> "Target":
        """A target from command-line text; ``None`` means the reference."""
        if isinstance(server_cmd, str):
            argv = tuple(shlex.split(server_cmd))
            if not argv:
                raise TargetError("--server-cmd is empty")
        else:
            argv = tuple(server_cmd) if server_cmd else REFERENCE_SERVER_CMD
        target = cls(server_cmd=argv, provisioner=provisioner or REFERENCE_PROVISIONER)
        target.provisioner_class()  # fail early on a bad name
        return target

    def provisioner_class(self) -> type:
        module_name, sep, class_name = self.provisioner.partition(":")
        if not sep or not module_name or not class_name:
            raise TargetError(f"--provisioner {self.provisioner!r}: use module:Class")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise TargetError(f"--provisioner {self.provisioner!r}: cannot import {module_name}: {exc}") from None
        try:
            return getattr(module, class_name)
        except AttributeError:
            raise TargetError(f"--provisioner {self.provisioner!r}: {module_name} has no {class_name}") from None

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
        return {"server_cmd": list(self.server_cmd), "provisioner": self.provisioner}
