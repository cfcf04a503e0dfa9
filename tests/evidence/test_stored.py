"""Evidence as a report stores it: compressed under ``<name>.gz``, read and cited by the name the run wrote."""

from __future__ import annotations

import gzip
import stat
from pathlib import Path

import pytest

from harness.evidence import stored

LINES = "".join(f'{{"n": {n}, "text": "line {n} \\u2028 ✓"}}\n' for n in range(200)).encode()


def test_text_evidence_kinds_are_stored_compressed_and_cited_by_their_own_names():
    assert stored.stored_name("rollouts/A/rollout-1.jsonl") == "rollouts/A/rollout-1.jsonl.gz"
    assert stored.stored_name("core-export.json") == "core-export.json.gz"
    assert stored.stored_name("core/app.log") == "core/app.log.gz"
    assert stored.stored_name("tui/A.screen.txt") == "tui/A.screen.txt.gz"
    assert stored.stored_name("picture.png") == "picture.png"
    for name in ("rollouts/A/rollout-1.jsonl", "core-export.json", "picture.png"):
        assert stored.cited_name(stored.stored_name(name)) == name
    assert stored.cited_name("archive.tar.gz") == "archive.tar.gz"  # not a stored text file: its own name
    assert stored.is_stored_compressed("a.jsonl.gz") and not stored.is_stored_compressed("archive.tar.gz")


def test_a_gzip_file_of_another_kind_is_read_as_it_is(tmp_path: Path):
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(stored.pack(b"not a stored evidence file"))
    assert stored.read_bytes(archive) == archive.read_bytes()  # an artifact of its own, byte for byte


def test_a_compressed_file_holds_the_written_bytes_and_reads_by_the_written_name(tmp_path: Path):
    written = tmp_path / "log.jsonl"
    written.write_bytes(LINES)
    kept = stored.compress(written)
    assert kept == tmp_path / "log.jsonl.gz" and not written.exists()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert gzip.decompress(kept.read_bytes()) == LINES and kept.stat().st_size < len(LINES) // 4
    assert stored.exists(written) and stored.locate(written) == kept
    assert stored.read_bytes(written) == LINES == stored.read_bytes(kept)
    with stored.open_text(written) as handle:
        lines = list(handle)
    # lines end at "\n" only: a U+2028 inside a JSON string does not split a line
    assert len(lines) == 200 and lines[7] == '{"n": 7, "text": "line 7 \\u2028 ✓"}\n'


def test_the_same_content_is_stored_as_the_same_bytes(tmp_path: Path):
    first, second = tmp_path / "a" / "x.json", tmp_path / "b" / "x.json"
    for path in (first, second):
        path.parent.mkdir()
        path.write_bytes(LINES)
    assert stored.compress(first).read_bytes() == stored.compress(second).read_bytes() == stored.pack(LINES)


def test_a_plain_file_is_read_as_it_is_and_a_missing_one_is_named(tmp_path: Path):
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b"{}\n")
    assert stored.locate(plain) == plain and stored.read_bytes(plain) == b"{}\n"
    missing = tmp_path / "absent.jsonl"
    assert not stored.exists(missing) and stored.locate(missing) is None
    with pytest.raises(FileNotFoundError, match="absent.jsonl"):
        stored.read_bytes(missing)


def test_compress_all_keeps_other_kinds_as_written(tmp_path: Path):
    files = []
    for name in ("a.jsonl", "b.png", "c.log"):
        (tmp_path / name).write_bytes(b"x" * 100)
        files.append(tmp_path / name)
    assert [p.name for p in stored.compress_all(files)] == ["a.jsonl.gz", "b.png", "c.log.gz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl.gz", "b.png", "c.log.gz"]
