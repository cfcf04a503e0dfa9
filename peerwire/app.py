"""The running app: owns one home, serves the control socket, runs adapters.

``peerwire app --home H`` runs in the foreground. It creates the home (0700),
takes the home's exclusive lock, opens the private control socket (0600), logs
to ``H/app.log`` and stderr, and prints one JSON ``ready`` line on stdout once it
accepts calls. SIGTERM or SIGINT closes the socket, lets admitted deliveries
finish, releases the lock and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sqlite3
import sys
from typing import Any

from .codex.adapter import CodexProvider
from .control import encode
from .delivery import Delivery
from .errors import EXIT_STATUS, Code, PeerwireError
from .home import Home, HomeLock, unusable
from .hub import WakeHub
from .limits import CONTROL_LINE_BYTES
from .operations import Operations
from .providers import ManualProvider, Provider, ProviderFactory
from .store import Store, storage_error

log = logging.getLogger("peerwire.app")


def _configure_logging(home: Home) -> logging.Handler:
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.close(os.open(home.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))  # private from creation
    file_handler = logging.FileHandler(home.log, encoding="utf-8")
    file_handler.setFormatter(fmt)
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(fmt)
    root = logging.getLogger("peerwire")
    root.setLevel(logging.INFO)
    root.addHandler(file_handler)
    root.addHandler(stream)
    return file_handler


RUNTIMES: dict[str, ProviderFactory] = {"codex": CodexProvider}
"""The providers that own agent runtimes, each built on the app's store (in the folder of its name)."""


class App:
    def __init__(self, home: Home, providers: dict[str, Provider] | None = None,
                 runtimes: dict[str, ProviderFactory] | None = None):
        self.home = home
        self.lock = HomeLock(home)
        self.hub = WakeHub()
        self.providers: dict[str, Provider] = {"manual": ManualProvider(), **(providers or {})}
        self.runtimes = RUNTIMES if runtimes is None else runtimes
        self.store: Store | None = None
        self.delivery: Delivery | None = None
        self.ops: Operations | None = None
        self._stop = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()

    async def run(self) -> int:
        self.home.prepare()
        self.lock.acquire()
        try:
            _configure_logging(self.home)
            self.store = self.home.open_store()
            self.delivery = Delivery(self.store, self.hub, self.providers)
            self.ops = Operations(self.store, self.delivery)
            for name, runtime in self.runtimes.items():
                self.providers.setdefault(name, runtime(self.store, self.delivery.published, self.home.path / name))
            for provider in self.providers.values():
                provider.recover()
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
                self._server = await asyncio.start_unix_server(self._connection, path=address,
                                                               limit=CONTROL_LINE_BYTES)
        finally:
            os.umask(old)

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        assert self.delivery is not None
        for provider in self.providers.values():
            await provider.close()
        await self.delivery.drain()
        try:
            self.home.socket.unlink()
        except FileNotFoundError:
            pass

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        write_lock = asyncio.Lock()
        calls: set[asyncio.Task] = set()
        receives = _Receives()
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:
                    await self._send(writer, write_lock, {"id": None, "ok": False, "error": PeerwireError(
                        Code.INVALID_ARGUMENT, f"control line longer than {CONTROL_LINE_BYTES} bytes").to_dict()})
                    break
                if not line:
                    break
                call = asyncio.ensure_future(self._answer(line, writer, write_lock, receives))
                calls.add(call)
                call.add_done_callback(calls.discard)
            receives.caller_gone()
            if calls:
                await asyncio.wait(list(calls))
        except (asyncio.CancelledError, ConnectionError):
            for call in calls:
                call.cancel()
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(self, line: bytes, writer: asyncio.StreamWriter, write_lock: asyncio.Lock,
                      receives: set[asyncio.Task]) -> None:
        request_id: Any = None
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or not isinstance(request.get("op"), str):
                raise PeerwireError(Code.INVALID_ARGUMENT, "a control request is an object with an op")
            request_id = request.get("id")
            if request["op"] == "receive_messages" and not receives.begin():
                return  # its caller hung up before it started: nothing to claim for, nobody to answer
            assert self.ops is not None
            result = await self.ops.call(request["op"], request.get("args"), request.get("token"),
                                         request.get("meta"))
            response = {"id": request_id, "ok": True, "result": result}
        except PeerwireError as exc:
            response = {"id": request_id, "ok": False, "error": exc.to_dict()}
        except json.JSONDecodeError as exc:
            response = {"id": None, "ok": False, "error": PeerwireError(
                Code.INVALID_ARGUMENT, f"control line is not JSON: {exc.msg}").to_dict()}
        except sqlite3.Error as exc:  # outside a transaction: a read of a disk that failed
            error = storage_error(exc, self.home.db)
            if error is None:
                log.exception("operation failed")
                error = PeerwireError(Code.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
            response = {"id": request_id, "ok": False, "error": error.to_dict()}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not take the app down with it
            log.exception("operation failed")
            response = {"id": request_id, "ok": False, "error": PeerwireError(
                Code.INTERNAL, f"internal error: {type(exc).__name__}: {exc}").to_dict()}
        await self._send(writer, write_lock, response)

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, lock: asyncio.Lock, message: dict) -> None:
        async with lock:
            try:
                writer.write(encode(message))
                await writer.drain()
            except ConnectionError:
                pass  # the caller gave up; what it asked for stays done


class _Receives:
    """The receives of one control connection, stopped when their caller hangs up.

    A receive whose caller is gone would claim work for nobody; it stops (or
    never starts), and what it claimed before that stays claimed, listed again
    to the recipient's next read. Every other call finishes: giving up cancels
    nothing that was asked for.
    """

    def __init__(self) -> None:
        self._running: set[asyncio.Task] = set()
        self._gone = False

    def begin(self) -> bool:
        """Called by a receive as it starts; ``False`` when its caller already hung up."""
        if self._gone:
            return False
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return True

    def caller_gone(self) -> None:
        self._gone = True
        for task in list(self._running):
            task.cancel()


def run_app(home: Home, providers: dict[str, Provider] | None = None) -> int:
    """Run the app in the foreground; a home it cannot own is one line on stderr and a distinct status."""
    try:
        return asyncio.run(App(home, providers).run())
    except OSError as exc:  # a file of the home that the checks could not foresee (a full disk, EACCES)
        error = unusable(exc)
    except PeerwireError as exc:
        error = exc
    sys.stderr.write(f"peerwire app: {error.code.value}: {error.message}\n")
    return EXIT_STATUS.get(error.code, 2)
