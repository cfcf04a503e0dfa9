"""The running app: owns one home, serves the control socket, runs adapters.

``peerwire app --home H`` runs in the foreground. It creates the home (0700),
takes the home's exclusive lock, opens the private control socket (0600), logs
to ``H/app.log`` and stderr, and prints one JSON ``ready`` line on stdout once it
accepts calls. SIGTERM or SIGINT closes the socket, lets admitted deliveries
finish, releases the lock and exits 0.

A store that is not whole and this home's own (missing, another home's, or
holding fewer records than the home receipted) is refused with exit status 5;
``--accept-store-loss`` serves it anyway, recording the loss
(:meth:`~peerwire.home.Home.open_store`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys

from .acp.adapter import AcpProvider
from .codex.adapter import CodexProvider
from . import contract
from .control_server import ControlServer, RepeatedFailures
from .delivery import Delivery
from .errors import EXIT_STATUS, PeerwireError
from .home import Home, HomeLock, unusable
from .home_files import open_private
from .hub import WakeHub
from .limits import CONTROL_BACKLOG, MAX_LINE_BYTES
from .operations import Operations
from .providers import ManualProvider, Provider, ProviderFactory
from .store import Store

log = logging.getLogger("peerwire.app")


def _configure_logging(home: Home) -> logging.Handler:
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Private from creation, never through a link, tightened if it was not.
    log_file = os.fdopen(open_private(home.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a", encoding="utf-8")
    file_handler = logging.StreamHandler(log_file)
    file_handler.setFormatter(fmt)
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(fmt)
    root = logging.getLogger("peerwire")
    root.setLevel(logging.INFO)
    root.addHandler(file_handler)
    root.addHandler(stream)
    return file_handler


RUNTIMES: dict[str, ProviderFactory] = {
    "codex": CodexProvider,
    "acp": AcpProvider,  # type: ignore[dict-item]  # no publish_captured: Delivery looks it up with getattr
}
"""The providers that own agent runtimes, each built on the app's store (in the folder of its name)."""


class App:
    def __init__(self, home: Home, providers: dict[str, Provider] | None = None,
                 runtimes: dict[str, ProviderFactory] | None = None, *, accept_store_loss: bool = False):
        self.home = home
        self.accept_store_loss = accept_store_loss
        self.lock = HomeLock(home)
        self.hub = WakeHub()
        self.providers: dict[str, Provider] = {"manual": ManualProvider(), **(providers or {})}
        self.runtimes = RUNTIMES if runtimes is None else runtimes
        self.store: Store | None = None
        self.delivery: Delivery | None = None
        self.ops: Operations | None = None
        self._stop = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self.control: ControlServer | None = None
        self.failures = RepeatedFailures(log)

    async def run(self) -> int:
        self.home.prepare()
        self.lock.acquire()
        try:
            _configure_logging(self.home)
            self.store = self.home.open_store(accept_loss=self.accept_store_loss)
            self.delivery = Delivery(self.store, self.hub, self.providers)
            self.ops = Operations(self.store, self.delivery, operator=self.home.ensure_operator_credential())
            for name, runtime in self.runtimes.items():
                self.providers.setdefault(name, runtime(self.store, self.delivery.published, self.home.path / name))
            for provider in self.providers.values():
                provider.recover()
            self.control = ControlServer(self.ops)
            contract.prepare_validators()  # the first call of each tool pays no schema compilation
            asyncio.get_running_loop().set_exception_handler(self.failures)
            await self._serve()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stop.set)
            log.info("app ready: home %s, pid %d", self.home.path, os.getpid())
            sys.stdout.write(json.dumps({"event": "ready", "pid": os.getpid(), "home": str(self.home.path)}) + "\n")
            sys.stdout.flush()
            await self._stop.wait()
            log.info("stopping")
            await self._shutdown()
            return 0
        finally:
            if self.store is not None:
                self.store.close()
            self.lock.release()

    async def _serve(self) -> None:
        try:
            self.home.socket.unlink()
        except FileNotFoundError:
            pass
        # umask makes the socket 0600 from the moment it exists, not after a chmod.
        old = os.umask(0o177)
        try:
            with self.home.socket_address() as address:
                assert self.control is not None
                self._server = await asyncio.start_unix_server(self.control.accept, path=address,
                                                               limit=MAX_LINE_BYTES, backlog=CONTROL_BACKLOG)
        finally:
            os.umask(old)

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        assert self.control is not None
        self.control.close_all()
        self.failures.flush()
        assert self.delivery is not None
        for provider in self.providers.values():
            await provider.close()
        await self.delivery.drain()
        try:
            self.home.socket.unlink()
        except FileNotFoundError:
            pass


def run_app(home: Home, providers: dict[str, Provider] | None = None, *, accept_store_loss: bool = False) -> int:
    """Run the app in the foreground; a home it cannot own is one line on stderr and a distinct status."""
    try:
        return asyncio.run(App(home, providers, accept_store_loss=accept_store_loss).run())
    except OSError as exc:  # a file of the home that the checks could not foresee (a full disk, EACCES)
        error = unusable(exc)
    except PeerwireError as exc:
        error = exc
    sys.stderr.write(f"peerwire app: {error.code.value}: {error.message}\n")
    return EXIT_STATUS.get(error.code, 2)
