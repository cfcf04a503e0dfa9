from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.contract.interface import Caller
from harness.contract.reference import ReferenceProvisioner
from peerwire.control import ControlClient
from peerwire.home import HOME_ENV, SESSION_ENV
from tests.patience import WAIT_S


@pytest.fixture
def core(tmp_path: Path):
    """A real ``peerwire app`` subprocess on a fresh home."""
    prov = ReferenceProvisioner(tmp_path)
    prov.start()
    yield prov
    prov.stop()


def cli(core: ReferenceProvisioner, *args: str, caller: Caller | None = None, stdin: str | None = None,
        timeout: float = WAIT_S) -> subprocess.CompletedProcess:
    """Run ``peerwire ARGS --json`` as ``caller`` against ``core``."""
    env = {**os.environ, HOME_ENV: str(core.home.path)}
    env.pop(SESSION_ENV, None)
    if caller is not None:
        env[SESSION_ENV] = caller.token
    return subprocess.run([sys.executable, "-m", "peerwire", *args, "--json"], env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def cli_json(core, *args, **kw) -> dict:
    done = cli(core, *args, **kw)
    return json.loads(done.stdout)


def call(core: ReferenceProvisioner, caller: Caller, op: str, args: dict | None = None, wait_s: float = 0):
    return ControlClient(core.home, caller.token).call(op, args or {}, wait_s=wait_s)


def wait_until(predicate, timeout: float, what: str):
    """Poll an observable condition with a hard bound (for state that has no event)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
