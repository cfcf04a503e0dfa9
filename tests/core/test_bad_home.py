"""Bad local state: every entry point answers with one line naming the file and what to do.

Each case builds a real broken home on disk (a damaged SQLite file, a
directory where a file belongs, a path the system or SQLite cannot take, a
home of another user) and runs the real entry points against it: the app,
the CLI that opens the store (``home init``), the CLI as a client of the app,
and the MCP server. None may print a traceback, start an empty store over a
lost one, or exit with the status of an ordinary error.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from peerwire.errors import EXIT_STATUS, Code
from peerwire.home import HOME_ENV, SESSION_ENV, Home
from peerwire.limits import STORE_PATH_MAX_BYTES
from peerwire.store import Store
from tests.patience import WAIT_S

PEERWIRE = [sys.executable, "-m", "peerwire"]
TIMEOUT_S = WAIT_S


def run(argv: list, *, env: dict | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    return subprocess.run([*PEERWIRE, *argv], env={**base, **(env or {})}, input=input, capture_output=True,
                          timeout=TIMEOUT_S)


def one_line(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line of error, got:\n{text}"
    return lines[0]


def shown(path: Path | bytes) -> str:
    """How a message names a path (undecodable bytes escaped)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def real_store(home: Path, records: int = 0) -> Path:
    """A store written by peerwire itself, with ``records`` information records."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    store = Store(home / "peerwire.db")
    try:
        a, _ = store.registry.register_agent("a", "manual")
        b, _ = store.registry.register_agent("b", "manual")
        for n in range(records):
            store.mailbox.admit_information(a, b, f"record {n} " + "x" * 500)
        store.database.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()
    return home / "peerwire.db"


# -- the broken homes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Broken:
    name: str
    build: Callable[[Path], Path]
    """Makes the broken home under the given directory; returns the home path."""
    code: Code
    culprit: Callable[[Path], Path]
    """The file the message must name."""
    store_only: bool = False
    """Only what opens the store sees it (the app, ``home init``); clients see no app."""


def garbage_store(tmp: Path) -> Path:
    home = tmp / "home"
    home.mkdir(mode=0o700)
    (home / "peerwire.db").write_bytes(os.urandom(3 * 4096))
    return home


def truncated_store(tmp: Path) -> Path:
    db = real_store(tmp / "home", records=200)
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size // 3)
    return db.parent


def damaged_pages(tmp: Path) -> Path:
    db = real_store(tmp / "home", records=400)
    size = db.stat().st_size
    with open(db, "r+b") as f:
        # Page 1 (the header and schema) stays intact: opening and the first
        # queries work, only reads of the damaged pages would fail later.
        f.seek(size // 2 - (size // 2) % 4096)
        f.write(os.urandom(3 * 4096))
    return db.parent


def empty_store(tmp: Path) -> Path:
    home = tmp / "home"
    home.mkdir(mode=0o700)
    (home / "peerwire.db").touch()
    return home


def directory_named(name: str) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        home = tmp / "home"
        real_store(home)
        (home / name).mkdir()
        return home

    build.__name__ = f"{name}_as_directory"
    return build


def home_is_a_file(tmp: Path) -> Path:
    (tmp / "home").write_text("not a directory\n")
    return tmp / "home"


def long_home(extra: int) -> Callable[[Path], Path]:
    """A home whose store path is ``extra`` bytes over SQLite's limit (or under it, if negative)."""

    def build(tmp: Path) -> Path:
        prefix = str(tmp / "h")
        want = STORE_PATH_MAX_BYTES + extra - len("/peerwire.db")
        parts, size = [], len(prefix.encode())
        while size < want:
            part = "d" * min(200, want - size - 1)
            parts.append(part)
            size += 1 + len(part)
        home = Path(prefix, *parts)
        assert len(os.fsencode(home / "peerwire.db")) == STORE_PATH_MAX_BYTES + extra
        return home

    return build


def over_path_max(tmp: Path) -> Path:
    return Path(tmp, *(["p" * 200] * 25))  # 5,000+ bytes: beyond PATH_MAX (4096)


def undecodable(tmp: Path) -> Path:
    return Path(os.fsdecode(os.fsencode(tmp) + b"/home-\xff\xfe"))


def foreign_owner(tmp: Path) -> Path:
    home = tmp / "home"
    real_store(home)
    os.chown(home, 4242, 4242)
    return home


CASES = [
    Broken("garbage-store", garbage_store, Code.STORE_DAMAGED, lambda h: h / "peerwire.db", store_only=True),
    Broken("truncated-store", truncated_store, Code.STORE_DAMAGED, lambda h: h / "peerwire.db", store_only=True),
    Broken("damaged-pages", damaged_pages, Code.STORE_DAMAGED, lambda h: h / "peerwire.db", store_only=True),
    Broken("empty-store", empty_store, Code.STORE_DAMAGED, lambda h: h / "peerwire.db", store_only=True),
    Broken("wal-directory", directory_named("peerwire.db-wal"), Code.HOME_INVALID,
           lambda h: h / "peerwire.db-wal", store_only=True),
    Broken("lock-directory", directory_named("app.lock"), Code.HOME_INVALID, lambda h: h / "app.lock",
           store_only=True),
    Broken("log-directory", directory_named("app.log"), Code.HOME_INVALID, lambda h: h / "app.log",
           store_only=True),
    Broken("socket-directory", directory_named("control.sock"), Code.HOME_INVALID, lambda h: h / "control.sock"),
    Broken("home-is-a-file", home_is_a_file, Code.HOME_INVALID, lambda h: h),
    Broken("home-too-long-for-sqlite", long_home(1), Code.HOME_INVALID, lambda h: h / "peerwire.db",
           store_only=True),
    Broken("home-over-path-max", over_path_max, Code.HOME_INVALID, lambda h: h),
    Broken("home-not-utf8", undecodable, Code.HOME_INVALID, lambda h: h),
]
if os.geteuid() == 0:
    CASES.append(Broken("home-of-another-user", foreign_owner, Code.HOME_INVALID, lambda h: h))


def symlink_named(name: str, dangling: bool = False) -> Callable[[Path], Path]:
    """A home of ours with a symbolic link planted where ``name`` belongs (to a file outside, or to nothing)."""

    def build(tmp: Path) -> Path:
        home = tmp / "home"
        if name.startswith("peerwire.db"):
            home.mkdir(mode=0o777)
        else:
            real_store(home)
            home.chmod(0o777)  # what a careless setup leaves: anyone could have planted the link
        target = tmp / f"outside-{name}"
        if not dangling:
            target.write_bytes(b"precious: not peerwire's\n")
        (home / name).symlink_to(target)
        return home

    build.__name__ = f"{name}_as_symlink"
    return build


def owned_by_another_user(name: str) -> Callable[[Path], Path]:
    """A home of ours where the file ``name`` belongs to uid 4242 (only root can build it)."""

    def build(tmp: Path) -> Path:
        home = tmp / "home"
        real_store(home)
        path = home / name
        if name == "control.sock":
            import socket

            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(str(path))
        elif not path.exists():
            path.write_bytes(b"")
        os.chown(path, 4242, 4242)
        return home

    build.__name__ = f"{name}_of_another_user"
    return build


def foreign_database(tmp: Path) -> Path:
    """Another program's SQLite database (its own tables, user_version 3) where the store belongs."""
    home = tmp / "home"
    home.mkdir(mode=0o700)
    db = sqlite3.connect(home / "peerwire.db")
    db.executescript("CREATE TABLE songs (id INTEGER PRIMARY KEY, title TEXT); "
                     "INSERT INTO songs(title) VALUES ('one'), ('two'); PRAGMA user_version = 3;")
    db.close()
    return home


def newer_schema(tmp: Path) -> Path:
    """A peerwire store written by a newer peerwire (schema version 999)."""
    db = real_store(tmp / "home", records=3)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 999")
    conn.close()
    return db.parent


CASES += [Broken(f"symlink-{name}", symlink_named(name, dangling=name == "peerwire.db"), Code.HOME_INVALID,
                 lambda h, name=name: h / name, store_only=name != "control.sock")
          for name in ("peerwire.db", "peerwire.db-wal", "peerwire.db-shm", "peerwire.db-mark", "operator.token",
                       "app.lock", "app.log", "control.sock")]
CASES += [Broken("foreign-database", foreign_database, Code.STORE_DAMAGED, lambda h: h / "peerwire.db",
                 store_only=True),
          Broken("newer-schema", newer_schema, Code.STORE_DAMAGED, lambda h: h / "peerwire.db", store_only=True)]
if os.geteuid() == 0:
    CASES += [Broken(f"foreign-{name}", owned_by_another_user(name), Code.HOME_INVALID,
                     lambda h, name=name: h / name, store_only=name != "control.sock")
              for name in ("peerwire.db", "peerwire.db-wal", "operator.token", "app.lock", "app.log", "control.sock")]


def db_directory(tmp: Path) -> Path:
    home = tmp / "home"
    home.mkdir(mode=0o700)
    (home / "peerwire.db").mkdir()
    return home


CASES.append(Broken("db-is-a-directory", db_directory, Code.HOME_INVALID, lambda h: h / "peerwire.db",
                    store_only=True))


def _ids(cases: list[Broken]) -> list[str]:
    return [c.name for c in cases]


def snapshot(home: Path) -> dict[str, tuple[int, bytes | None]]:
    """The store's files under ``home`` (mode and bytes), to prove none was replaced or rewritten."""
    return {path.name: (path.lstat().st_mode, path.read_bytes() if path.is_file() else None)
            for path in sorted(home.glob("peerwire.db*"))}


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_app_refuses_with_one_line(tmp_path, case):
    home = case.build(tmp_path)
    before = snapshot(home) if case.code is Code.STORE_DAMAGED else None
    done = run(["app", "--home", home])
    line = one_line(done.stderr)
    assert done.returncode == EXIT_STATUS[case.code], line
    assert shown(case.culprit(home)) in line, line
    assert done.stdout == b"", "a refused app never prints its ready line"
    if before is not None:
        # The damaged store is untouched, mode included: it is there to be rescued.
        assert snapshot(home) == before


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_home_init_refuses_with_one_line(tmp_path, case):
    home = case.build(tmp_path)
    done = run(["home", "init", "--home", home])
    line = one_line(done.stderr)
    assert done.returncode == EXIT_STATUS[case.code], line
    assert f"{case.code.value}:" in line and shown(case.culprit(home)) in line, line


CLIENT_CASES = [c for c in CASES if not c.store_only]


@pytest.mark.parametrize("case", CLIENT_CASES, ids=_ids(CLIENT_CASES))
def test_cli_client_refuses_with_one_line(tmp_path, case):
    home = case.build(tmp_path)
    done = run(["agent", "list", "--home", home])
    line = one_line(done.stderr)
    assert done.returncode == EXIT_STATUS[case.code], line
    assert f"{case.code.value}:" in line and shown(case.culprit(home)) in line, line


@pytest.mark.parametrize("case", CLIENT_CASES, ids=_ids(CLIENT_CASES))
def test_mcp_tool_call_is_a_tool_error_and_the_server_stays_up(tmp_path, case):
    home = case.build(tmp_path)
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_agents", "arguments": {}}},
    ]
    stdin = b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    env = {HOME_ENV: os.fsdecode(os.fsencode(home)), SESSION_ENV: "a-session-token"}
    proc = subprocess.Popen([*PEERWIRE, "mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env={**{k: v for k, v in os.environ.items() if k not in env}, **env})
    with proc:
        answers, stderr = _exchange(proc, stdin)
    result = answers[2]["result"]
    assert result["isError"] is True, result
    error = result["structuredContent"]["error"]
    assert error["code"] == case.code.value
    assert shown(case.culprit(home)) in error["message"]
    assert b"Traceback" not in stderr


def _exchange(proc: subprocess.Popen, stdin: bytes) -> tuple[dict, bytes]:
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(stdin)
        proc.stdin.flush()
        answers = {}
        while 2 not in answers:
            answer = json.loads(proc.stdout.readline())
            answers[answer.get("id")] = answer
        # Still serving after the failed call.
        proc.stdin.write(b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == {"jsonrpc": "2.0", "id": 3, "result": {}}
        proc.stdin.close()
        assert proc.wait(timeout=TIMEOUT_S) == 0
    finally:
        proc.kill()
        proc.wait()
    return answers, proc.stderr.read() if proc.stderr else b""


# -- the boundary and what a good home looks like -----------------------------------------------


def _start_and_stop(home: Path) -> subprocess.CompletedProcess:
    """Start the app on ``home``, wait for its ready line, stop it with SIGTERM."""
    base = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    with subprocess.Popen([*PEERWIRE, "app", "--home", home], env=base, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as proc:
        try:
            assert proc.stdout is not None
            ready = json.loads(proc.stdout.readline() or b"null")
            assert ready and ready["event"] == "ready", f"no ready line; see {home / 'app.log'}"
            proc.terminate()
            assert proc.wait(timeout=TIMEOUT_S) == 0
        finally:
            proc.kill()
    return proc


def test_a_home_at_the_sqlite_path_limit_works(tmp_path):
    home = long_home(0)(tmp_path)
    _start_and_stop(home)
    assert (home / "peerwire.db").stat().st_size > 0


def test_store_files_are_private_from_creation(tmp_path):
    home = tmp_path / "home"
    base = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    umask = os.umask(0o022)  # the usual umask, under which SQLite's own default would be 0644
    try:
        proc = subprocess.Popen([*PEERWIRE, "app", "--home", home], env=base, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
    finally:
        os.umask(umask)
    with proc:
        try:
            assert proc.stdout is not None
            assert json.loads(proc.stdout.readline())["event"] == "ready"
            # While the app runs, the WAL and its index exist beside the store.
            for name in ("peerwire.db", "peerwire.db-wal", "peerwire.db-shm", "peerwire.db-mark", "operator.token",
                         "app.lock", "app.log"):
                mode = stat.S_IMODE((home / name).stat().st_mode)
                assert mode == 0o600, f"{name} is {mode:o}"
        finally:
            proc.terminate()
            proc.wait(timeout=TIMEOUT_S)


def test_an_existing_world_readable_store_is_made_private(tmp_path):
    db = real_store(tmp_path / "home")
    db.chmod(0o644)
    _start_and_stop(db.parent)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_a_new_store_appears_only_whole(tmp_path):
    """A fresh home's store is created aside and renamed into place: never a 0-byte peerwire.db."""
    home = Home(tmp_path / "home")
    home.create()
    home.open_store().close()
    names = sorted(p.name for p in home.path.iterdir())
    assert names == ["peerwire.db", "peerwire.db-mark"], names  # the store and its high-water mark, no leftovers
    assert sqlite3.connect(home.db).execute("SELECT COUNT(*) FROM agents").fetchone() == (0,)


LINKED = ("peerwire.db", "peerwire.db-wal", "peerwire.db-shm", "peerwire.db-mark", "operator.token", "app.lock",
          "app.log", "control.sock")


@pytest.mark.parametrize("name", LINKED)
def test_a_planted_link_is_never_followed(tmp_path, name):
    home = symlink_named(name, dangling=name == "peerwire.db")(tmp_path)
    target = tmp_path / f"outside-{name}"
    before = target.read_bytes() if target.exists() else None
    for argv in (["app", "--home", home], ["home", "init", "--home", home]):
        done = run(argv)
        assert done.returncode == EXIT_STATUS[Code.HOME_INVALID], one_line(done.stderr)
        after = target.read_bytes() if target.exists() else None
        assert after == before, f"{argv[0]} wrote through the link at {name}: {before!r} -> {after!r}"
        assert (home / name).is_symlink(), "the link itself is left for its owner to look at"


def test_every_file_the_app_writes_is_made_private_even_one_that_was_there(tmp_path):
    db = real_store(tmp_path / "home")
    home = db.parent
    (home / "app.log").write_text("an older log line\n")
    (home / "app.log").chmod(0o644)
    (home / "app.lock").write_text("")
    (home / "app.lock").chmod(0o666)
    db.chmod(0o640)
    _start_and_stop(home)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in home.iterdir() if path.is_file()}
    assert set(modes.values()) == {0o600}, modes
    assert (home / "app.log").read_text().startswith("an older log line\n"), "the log is appended to, not replaced"
