"""The secret scan: no credential from the environment or an auth home may stay in a report.

Secrets come from three places:

* environment variables whose names look secret (``*KEY*``, ``*TOKEN*``,
  ``*SECRET*``, ``*PASSWORD*``, ``*PASSWD*``, ``*CREDENTIAL*``, ``*AUTH*``,
  ``*COOKIE*``, ``*SESSION_ID*`` — the last is how peerwire hands an agent its
  session token);
* every string value of ``auth.json`` in an authorized Codex home (only when a
  real provider was used: the runner passes the home);
* every peerwire session token the run issued, from the run's
  :class:`TokenLedger` files (the lab writes each token there the moment the
  core issues it, so a scenario that dies midway still leaves its tokens);
* extra named values the caller knows.

Values shorter than :data:`MIN_SECRET_CHARS` are ignored: they would match
ordinary text and cannot be told from it. Each value is searched raw and in its
JSON-escaped forms, so a secret inside a JSON string is found too. A finding is
replaced in place by ``[redacted:<NAME>]`` and reported by name, never by value.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.names import AUTH_FILE
from harness.evidence import stored
from harness.json_values import walk

MIN_SECRET_CHARS = 8
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION_ID", re.IGNORECASE)


def placeholder(name: str) -> str:
    return f"[redacted:{name}]"


@dataclass
class Finding:
    """Where the value of one named secret was found (and redacted)."""

    name: str
    location: str
    occurrences: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "location": self.location, "occurrences": self.occurrences}


@dataclass
class SecretScan:
    """Named secret values to keep out of a report.

    Longer values are redacted first, so a secret that contains another one is
    replaced whole.
    """

    secrets: dict[str, str] = field(default_factory=dict)
    _compiled: tuple[tuple[tuple[str, str], ...], list[tuple[str, str]], re.Pattern[str] | None] | None = field(
        default=None, init=False, repr=False, compare=False)

    @classmethod
    def collect(cls, environ: Mapping[str, str] | None = None, *, auth_home: str | os.PathLike[str] | None = None,
                ledgers: str | os.PathLike[str] | None = None,
                extra: Mapping[str, str] | None = None) -> "SecretScan":
        """Secrets from ``environ`` (default ``os.environ``), ``auth_home``/auth.json, the session
        tokens in every ledger under ``ledgers`` (see :class:`TokenLedger`) and ``extra``.

        An unreadable or non-JSON auth file is scanned as one secret (its whole
        text), so it can never leak unnoticed; so is an unreadable ledger line.
        """
        found: dict[str, str] = {}
        for name, value in (os.environ if environ is None else environ).items():
            if SECRET_NAME.search(name):
                found[name] = value
        if auth_home is not None:
            found.update(auth_values(Path(auth_home) / AUTH_FILE))
        if ledgers is not None:
            found.update(TokenLedger.read_all(Path(ledgers)))
        found.update(extra or {})
        return cls({name: value for name, value in found.items() if len(value) >= MIN_SECRET_CHARS})

    @property
    def names(self) -> list[str]:
        return sorted(self.secrets)

    def _patterns(self) -> list[tuple[str, str]]:
        """Every form of every secret (as is, and JSON-escaped both ways), longest secret first. Built once
        for the secrets as they are: a report scans tens of thousands of strings."""
        return self._compile()[1]

    def _compile(self) -> tuple[tuple[tuple[str, str], ...], list[tuple[str, str]], re.Pattern[str] | None]:
        key = tuple(self.secrets.items())
        if self._compiled is None or self._compiled[0] != key:
            out: list[tuple[str, str]] = []
            for name, value in sorted(self.secrets.items(), key=lambda kv: -len(kv[1])):
                for form in dict.fromkeys([value, json.dumps(value)[1:-1],
                                           json.dumps(value, ensure_ascii=False)[1:-1]]):
                    out.append((name, form))
            anywhere = re.compile("|".join(re.escape(form) for _, form in out)) if out else None
            self._compiled = (key, out, anywhere)
        return self._compiled

    def found_in(self, data: str | bytes) -> list[str]:
        """The names of the secrets ``data`` holds, in any of their forms (nothing is changed)."""
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        anywhere = self._compile()[2]
        if anywhere is None or not anywhere.search(text):
            return []
        return sorted({name for name, form in self._patterns() if form in text})

    def holders(self, root: Path) -> list[Path]:
        """The files under ``root`` that hold a secret (read as stored: a compressed file by its content), and
        every credential file whatever it holds."""
        return [path for path in sorted(p for p in root.rglob("*") if p.is_file())
                if stored.cited_name(path.name) == AUTH_FILE or self.found_in(stored.read_bytes(path))]

    def redact_text(self, text: str, location: str, findings: list[Finding]) -> str:
        """``text`` with every secret replaced; appends a :class:`Finding` per secret found."""
        anywhere = self._compile()[2]
        if anywhere is None or not anywhere.search(text):
            return text  # the common case, decided in one pass
        counts: dict[str, int] = {}
        for name, form in self._patterns():
            hits = text.count(form)
            if hits:
                text = text.replace(form, placeholder(name))
                counts[name] = counts.get(name, 0) + hits
        findings.extend(Finding(name, location, n) for name, n in sorted(counts.items()))
        return text

    def redact_value(self, value: Any, location: str, findings: list[Finding]) -> Any:
        """A JSON-like value with secrets replaced in every string, keys included."""
        if isinstance(value, str):
            return self.redact_text(value, location, findings)
        if isinstance(value, list):
            return [self.redact_value(v, location, findings) for v in value]
        if isinstance(value, dict):
            return {self.redact_text(str(k), location, findings): self.redact_value(v, location, findings)
                    for k, v in value.items()}
        return value

    def redact_file(self, path: Path, location: str) -> list[Finding]:
        """Redact one file in place (text as UTF-8, anything else byte-wise); keeps its mode. A file a report
        stores compressed is searched and redacted in the content it holds, and stays compressed."""
        findings: list[Finding] = []
        packed = stored.is_stored_compressed(path.name)
        data = stored.read_bytes(path)
        counts: dict[str, int] = {}
        for name, form in self._patterns():
            needle = form.encode("utf-8")
            hits = data.count(needle)
            if hits:
                data = data.replace(needle, placeholder(name).encode("utf-8"))
                counts[name] = counts.get(name, 0) + hits
        if counts:
            mode = path.stat().st_mode & 0o777
            path.write_bytes(stored.pack(data) if packed else data)
            path.chmod(mode)
        findings.extend(Finding(name, location, n) for name, n in sorted(counts.items()))
        return findings

    def redact_tree(self, root: Path, files: Iterable[Path] | None = None) -> list[Finding]:
        """Redact every file under ``root`` (or just ``files``); locations are relative to ``root``."""
        findings: list[Finding] = []
        targets = sorted(files) if files is not None else sorted(p for p in root.rglob("*") if p.is_file())
        for path in targets:
            findings.extend(self.redact_file(path, stored.cited_name(path.relative_to(root).as_posix())))
        return findings


class TokenLedger:
    """The peerwire session tokens one scenario run issued: a private file of JSON lines.

    Each line is ``{"agent": name, "token": value}``, appended (0600, in a 0700
    folder of the run home, never among the artifacts) when the core issues
    the token. The report's scan reads every ledger of the run, so a token
    that reached any artifact is redacted even if the run never printed it.
    """

    SUFFIX = ".tokens.jsonl"

    def __init__(self, folder: Path, scope: str):
        self.path = Path(folder) / f"{scope}{self.SUFFIX}"

    def add(self, agent: str, token: str) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        line = json.dumps({"agent": agent, "token": token}, ensure_ascii=False) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    @classmethod
    def read_all(cls, folder: Path) -> dict[str, str]:
        """``{"peerwire session token of <scope>/<agent>": token}`` from every ledger in ``folder``."""
        out: dict[str, str] = {}
        for path in sorted(folder.glob(f"*{cls.SUFFIX}")):
            scope = path.name[: -len(cls.SUFFIX)]
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                try:
                    entry = json.loads(line)
                    out[f"peerwire session token of {scope}/{entry['agent']}"] = str(entry["token"])
                except (ValueError, KeyError, TypeError):
                    # A torn last line (the writer died mid-write) is still a secret.
                    out[f"{path.name}:{number}"] = line.strip()
        return out


def auth_values(path: Path) -> dict[str, str]:
    """Every string of a Codex credential file, named ``auth.json:<path>`` (the whole text if it is not JSON)."""
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        document = json.loads(text)
    except ValueError:
        return {AUTH_FILE: text.strip()}
    return {f"{AUTH_FILE}:{'.'.join(map(str, where))}": value for where, value in walk(document)
            if isinstance(value, str)}
