"""Run an MCP stdio server and keep every line its client sent it: ``mcp_tee.py LOG -- SERVER_CMD...``.

Each line from the client goes to the server unchanged and is appended to
``LOG`` as it was read; the server's stdout goes back unchanged. A test puts it
in front of a server to see exactly what Codex sends (``tools/call`` params
included), which the server itself does not keep.
"""

from __future__ import annotations

import subprocess
import sys
import threading


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: mcp_tee.py LOG -- SERVER_CMD...\n")
        return 2
    log_path, command = argv[0], argv[2:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None

    def to_client() -> None:
        for line in server.stdout:  # type: ignore[union-attr]
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    relay = threading.Thread(target=to_client, daemon=True)
    relay.start()
    with open(log_path, "ab") as log:
        for line in sys.stdin.buffer:
            log.write(line)
            log.flush()
            server.stdin.write(line)
            server.stdin.flush()
    server.stdin.close()
    code = server.wait()
    relay.join()  # the server has exited: its stdout ends, and so does the relay
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
