"""An attach that is cancelled stays cancelled, and one that fails says why: the adapter against a stand-in
app-server process that answers ``initialize`` and then hangs on, or exits at, ``thread/start``."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import psutil
import pytest

from peerwire.codex.adapter import CodexProvider
from peerwire.codex.app_server import AppServerExited
from peerwire.errors import Code, PeerwireError
from peerwire.store import Store
from tests.patience import WAIT_S

STAND_IN = r"""
import json, os, sys
from pathlib import Path

for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        sys.stdout.write(json.dumps({"id": message["id"], "result": {"userAgent": "stand-in"}}) + "\n")
        sys.stdout.flush()
    elif message.get("method") == "thread/start":
        Path(os.environ["STAND_IN_HEARD"]).write_text(str(os.getpid()))
        if os.environ["STAND_IN_AT_THREAD_START"] == "exit":
            os._exit(3)
        # "hang": alive, reading, never answering
"""


class Attach:
    """One attach of agent B to the stand-in, run as its own task."""

    def __init__(self, tmp: Path, at_thread_start: str):
        self.heard = tmp / "heard"
        script = tmp / "stand_in.py"
        script.write_text(STAND_IN, encoding="utf-8")
        self.store = Store(tmp / "peerwire.db")
        self.agent, _ = self.store.registry.register_agent("B", "codex")
        self.codex = CodexProvider(self.store, lambda *_: None, tmp / "transcripts")
        self.task = asyncio.ensure_future(self.codex.attach(
            self.agent, codex=[sys.executable, os.fspath(script)], codex_home=os.fspath(tmp / "codex-home"),
            cwd=os.fspath(tmp), env={"STAND_IN_HEARD": os.fspath(self.heard),
                                     "STAND_IN_AT_THREAD_START": at_thread_start}))

    async def thread_start_heard(self) -> int:
        """The stand-in's pid, once it has read thread/start (the file appears then; polled, bounded)."""
        async with asyncio.timeout(WAIT_S):
            while not (self.heard.exists() and self.heard.read_text()):
                await asyncio.sleep(0.02)
        return int(self.heard.read_text())


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_cancelled_attach_raises_cancelled_error_and_closes_its_app_server(tmp_path):
    async def run():
        attach = Attach(tmp_path, "hang")
        try:
            pid = await attach.thread_start_heard()
            attach.task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await attach.task
            return attach, pid
        finally:
            await attach.codex.close()

    attach, pid = asyncio.run(run())
    assert gone(pid), "the cancelled attach's app-server outlived it"
    assert attach.agent.agent_id not in attach.codex.owners
    assert attach.store.registry.agent(attach.agent.agent_id).last_error is None, \
        "a cancellation is not an attach failure"


def test_an_app_server_that_exits_at_thread_start_fails_the_attach_with_its_cause(tmp_path):
    async def run():
        attach = Attach(tmp_path, "exit")
        try:
            with pytest.raises(PeerwireError) as failed:
                async with asyncio.timeout(WAIT_S):
                    await attach.task
            return failed.value
        finally:
            await attach.codex.close()

    error = asyncio.run(run())
    assert error.code == Code.APP_UNAVAILABLE
    assert isinstance(error.__cause__, AppServerExited), error.__cause__
