"""The wire layer on its own: what each kind of line means, with no process and no I/O."""

from __future__ import annotations

import json

import pytest

from peerwire import jsonrpc
from peerwire.jsonrpc import Batch, Notification, Rejected, Request, read_line
from peerwire.limits import MAX_JSON_DEPTH


def _rejected(raw: bytes, *, batches: bool = False) -> Rejected:
    message = read_line(raw, batches=batches)
    assert isinstance(message, Rejected), message
    return message


@pytest.mark.parametrize("raw", [b"\xff{}", b'{"id": "\xed\xa0\x80", "method": "ping"}', b"{", b"NaN",
                                 b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": Infinity}}',
                                 b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": -Infinity}}'])
def test_not_utf8_or_not_json_is_a_parse_error_with_id_null(raw):
    rejected = _rejected(raw)
    assert (rejected.id, rejected.code) == (None, jsonrpc.PARSE_ERROR)


@pytest.mark.parametrize("escape, where, code, answered_id", [
    ('{"jsonrpc":"2.0","id":"%s","method":"ping"}', "id", jsonrpc.INVALID_REQUEST, None),
    ('{"jsonrpc":"2.0","id":1,"method":"%s"}', "method", jsonrpc.METHOD_NOT_FOUND, 1),
    ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s"}}', "name", jsonrpc.INVALID_PARAMS, 1),
    ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"target":"a%sb"}}}', "target",
     jsonrpc.INVALID_PARAMS, 1),
    ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"%s":1}}}', "key", jsonrpc.INVALID_PARAMS, 1),
])
@pytest.mark.parametrize("surrogate", ["\\ud800", "\\uDBFF", "\\udc00"])
def test_a_lone_surrogate_is_refused_where_it_is(escape, where, code, answered_id, surrogate):
    rejected = _rejected((escape % surrogate).encode())
    assert (rejected.code, rejected.id) == (code, answered_id), where
    rejected.message.encode("utf-8")  # the answer itself is always writable


def test_a_surrogate_pair_is_text_not_a_lone_surrogate():
    message = read_line(b'{"jsonrpc":"2.0","id":"\\ud83c\\udf4e","method":"ping"}', batches=False)
    assert isinstance(message, Request) and message.id == "🍎"


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 985, 1000, 100_000])
def test_nesting_past_the_bound_is_an_invalid_request(depth):
    raw = b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":' + b"[" * depth + b"]" * depth + b"}}"
    rejected = _rejected(raw)
    assert rejected.code == jsonrpc.INVALID_REQUEST
    assert rejected.id in (7, None)  # the id when the line could be read, else null


def test_nesting_within_the_bound_is_fine():
    depth = MAX_JSON_DEPTH - 2
    raw = b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":' + b"[" * depth + b"]" * depth + b"}}"
    assert isinstance(read_line(raw, batches=False), Request)


@pytest.mark.parametrize("raw", [b'{"jsonrpc":"2.0","id":9}', b'{"jsonrpc":"2.0","id":9,"method":42}',
                                 b'{"jsonrpc":"2.0","id":9,"method":null}', b'{"jsonrpc":"2.0"}', b"{}",
                                 b'{"jsonrpc":"2.0","id":true,"method":"ping"}', b'{"id":1.5,"method":"ping"}',
                                 b'{"jsonrpc":"2.0","id":null,"method":"ping"}', b"42", b'"ping"'])
def test_what_is_not_a_request_is_an_invalid_request_with_id_null(raw):
    rejected = _rejected(raw)
    assert (rejected.code, rejected.id) == (jsonrpc.INVALID_REQUEST, None)


def test_notifications_and_responses_are_never_answered():
    assert isinstance(read_line(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}',
                                batches=False), Notification)
    assert read_line(b'{"jsonrpc":"2.0","id":3,"result":{}}', batches=False) is None
    assert read_line(b"   \r", batches=False) is None


def test_batches_only_where_the_revision_has_them():
    raw = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "x"},
                      {"jsonrpc": "2.0", "id": 2}]).encode()
    assert _rejected(raw).code == jsonrpc.INVALID_REQUEST
    batch = read_line(raw, batches=True)
    assert isinstance(batch, Batch)
    assert [type(i) for i in batch.items] == [Request, Notification, Rejected]
    assert _rejected(b"[]", batches=True).code == jsonrpc.INVALID_REQUEST


def test_encode_never_writes_nan_or_invalid_utf8():
    with pytest.raises(ValueError):
        jsonrpc.encode({"x": float("nan")})
    line = jsonrpc.encode({"x": "a\ud800b", "y": "é"})
    assert json.loads(line.decode("utf-8")) == {"x": "a?b", "y": "é"}
