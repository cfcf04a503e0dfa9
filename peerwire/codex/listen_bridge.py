"""Run ``codex app-server --listen unix://SOCKET`` and speak to it as if on stdio.

A Codex TUI can attach to an app-server only through its listen endpoint
(``codex --remote unix://SOCKET``), and that endpoint speaks WebSocket, one
JSON-RPC message a text frame. The owner (:class:`~.app_server.AppServerClient`)
speaks JSON lines on a child's stdio. This bridge is that child: it starts the
app-server in its own process group, waits for the socket, connects as a
WebSocket client and relays each stdin line as a frame and each frame as a
stdout line. Its own stderr carries the app-server's. When stdin ends, or the
app-server or the connection goes, it ends the other side and exits, so the
owner's ``close`` and exit handling work unchanged.

Usage: ``python -m peerwire.codex.listen_bridge CODEX... app-server --listen unix://SOCKET [ARGS]``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import struct
import sys
from pathlib import Path

SOCKET_WAIT_S = 60.0
_OP_TEXT, _OP_CLOSE, _OP_PING, _OP_PONG, _OP_CONTINUATION = 0x1, 0x8, 0x9, 0xA, 0x0


class WebSocket:
    """The client side of RFC 6455 on a stream pair: masked frames out, fragments joined in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect_unix(cls, path: str) -> WebSocket:
        reader, writer = await asyncio.open_unix_connection(path, limit=64 * 1024 * 1024)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status + b" ":
            raise ConnectionError(f"the app-server refused the WebSocket upgrade: {status.decode(errors='replace')}")
        return cls(reader, writer)

    async def send_text(self, text: str) -> None:
        await self._send(_OP_TEXT, text.encode("utf-8"))

    async def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        length = len(payload)
        if length < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
        elif length < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        await self.writer.drain()

    async def receive_text(self) -> str | None:
        """The next text message, or None when the connection closed."""
        parts: list[bytes] = []
        while True:
            try:
                first, second = await self.reader.readexactly(2)
            except asyncio.IncompleteReadError:
                return None
            final, opcode = first & 0x80, first & 0x0F
            length = second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
            mask = await self.reader.readexactly(4) if second & 0x80 else None
            payload = await self.reader.readexactly(length)
            if mask is not None:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == _OP_PING:
                await self._send(_OP_PONG, payload)
            elif opcode == _OP_CLOSE:
                with contextlib.suppress(ConnectionError):
                    await self._send(_OP_CLOSE, payload[:2])
                return None
            elif opcode in (_OP_TEXT, _OP_CONTINUATION):
                parts.append(payload)
                if final:
                    return b"".join(parts).decode("utf-8", errors="replace")

    def close(self) -> None:
        self.writer.close()


def socket_path(argv: list[str]) -> str:
    """The ``unix://PATH`` after ``--listen`` in the app-server's arguments."""
    for flag, value in zip(argv, argv[1:]):
        if flag == "--listen" and value.startswith("unix://") and len(value) > len("unix://"):
            return value[len("unix://"):]
    raise SystemExit("listen_bridge: the app-server arguments need --listen unix://PATH")


async def bridge(argv: list[str]) -> int:
    path = socket_path(argv)
    with contextlib.suppress(FileNotFoundError):
        Path(path).unlink()  # a stale socket of an earlier generation
    server = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                  stdout=asyncio.subprocess.DEVNULL)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SOCKET_WAIT_S
    socket = None
    while socket is None:
        if server.returncode is not None:
            return server.returncode
        try:
            socket = await WebSocket.connect_unix(path)
        except (FileNotFoundError, ConnectionRefusedError):
            if loop.time() > deadline:
                print(f"listen_bridge: {path} did not accept a connection within {SOCKET_WAIT_S:.0f}s",
                      file=sys.stderr)
                server.terminate()
                await server.wait()
                return 1
            await asyncio.sleep(0.05)  # the socket appears once the app-server listens; nothing signals it
    stdin = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    async def upstream() -> None:
        while line := await stdin.readline():
            text = line.decode("utf-8", errors="replace").rstrip("\r\n")
            if text:
                await socket.send_text(text)

    async def downstream() -> None:
        while (text := await socket.receive_text()) is not None:
            sys.stdout.write(text.replace("\n", " ") + "\n")
            sys.stdout.flush()

    relays = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream()),
              asyncio.ensure_future(server.wait())]
    await asyncio.wait(relays, return_when=asyncio.FIRST_COMPLETED)
    for relay in relays[:2]:
        relay.cancel()
    socket.close()
    if server.returncode is None:
        server.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(server.wait(), 10)
        except TimeoutError:
            server.kill()
            await server.wait()
    return server.returncode or 0


def main() -> None:
    argv = sys.argv[1:]
    if not argv:
        raise SystemExit(__doc__)
    sys.exit(asyncio.run(bridge(argv)))


if __name__ == "__main__":
    main()
