"""Envelopes read by the contract's grammar (``contracts/envelope.json``), never by the core's renderer.

An envelope is header lines in the order a form lists them, each ``Name: value``
with the value matching its template (``{field}`` stands for a field, matched by
the field's pattern), then the payload line, a line break and the body exactly as
sent. :func:`read` parses a text into an :class:`Envelope` (which form, which
headers, the fields they carry, the payload); :func:`deviations` says how one
differs from what the grammar prescribes for a record. :func:`skim` is for a reader
that acts on a record rather than judging it (the scripted model): it takes what
fields it can and forgives the rest, so a deviation is reported by the checks,
not hidden behind a model that stopped reading. A core that renders its
envelopes another way fails the checks that read them, whatever the reference
core does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from harness.contract_tables import ENVELOPE, table

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Envelope:
    """An envelope as the grammar reads it."""

    form: str
    """``peer`` (agents addressed by name) or ``collab`` (agents of a tree, addressed by path)."""
    present: tuple[int, ...]
    """The indices, in the form's header list, of the headers the text has."""
    fields: Mapping[str, str]
    payload: str


def grammar() -> dict[str, Any]:
    return table(ENVELOPE)


def message_type(kind: str) -> str:
    """The message type a record of ``kind`` is announced as."""
    return grammar()["message_types"][kind]


def type_header() -> str:
    """The first header of every form: where any envelope starts (``Message Type``)."""
    return grammar()["forms"]["peer"]["headers"][0]["name"]


@lru_cache(maxsize=None)
def _value_pattern(template: str) -> re.Pattern[str]:
    fields = grammar()["fields"]
    out, at = [], 0
    for match in _PLACEHOLDER.finditer(template):
        out += [re.escape(template[at:match.start()]), f"(?P<{match.group(1)}>(?:{fields[match.group(1)]}))"]
        at = match.end()
    return re.compile("".join([*out, re.escape(template[at:])]))


def _read_form(form: str, text: str) -> Envelope | None:
    spec = grammar()
    sep, line_break = spec["header_separator"], spec["line_break"]
    present: list[int] = []
    fields: dict[str, str] = {}
    rest = text
    for index, header in enumerate(spec["forms"][form]["headers"]):
        line, found, after = rest.partition(line_break)
        if not found:
            return None
        name, has_sep, value = line.partition(sep)
        match = _value_pattern(header["value"]).fullmatch(value) if has_sep and name == header["name"] else None
        if match is None:
            if "when" not in header:
                return None
            continue
        for key, got in match.groupdict().items():
            if fields.setdefault(key, got) != got:
                return None  # one field, two values in two headers
        present.append(index)
        rest = after
    line, found, payload = rest.partition(line_break)
    if not found or line != spec["payload_line"]:
        return None
    return Envelope(form, tuple(present), fields, payload)


def read(text: str) -> Envelope | None:
    """``text`` as an envelope of one of the grammar's forms, or None when it is none.

    The payload is everything after the payload line's line break, byte for byte:
    a body that itself holds ``Payload:`` lines, empty lines or ``\\r\\n`` stays whole.
    """
    for form in grammar()["forms"]:
        found = _read_form(form, text)
        if found is not None:
            return found
    return None


@lru_cache(maxsize=None)
def _loose_headers() -> dict[str, list[re.Pattern[str]]]:
    """Each header name the grammar knows, with its value templates, any text standing for a field."""
    out: dict[str, list[re.Pattern[str]]] = {}
    for form in grammar()["forms"].values():
        for header in form["headers"]:
            template, parts, at = header["value"], [], 0
            for match in _PLACEHOLDER.finditer(template):
                parts += [re.escape(template[at:match.start()]), f"(?P<{match.group(1)}>.+?)"]
                at = match.end()
            pattern = re.compile("".join([*parts, re.escape(template[at:])]))
            if pattern not in out.setdefault(header["name"], []):
                out[header["name"]].append(pattern)
    return out


def skim(text: str) -> tuple[dict[str, str], str] | None:
    """The fields and the payload of the envelope in ``text``, read the way a model reads one.

    The envelope starts where the type header first appears; each ``Name: value`` line
    after it whose name the grammar knows and whose value fits one of that name's templates
    gives its fields (a field's own pattern is not enforced, and any other line is passed
    over), up to the payload line; the payload is the rest, exactly. None without a type
    header or without a payload line after it.
    """
    spec = grammar()
    sep, line_break = spec["header_separator"], spec["line_break"]
    start = f"{type_header()}{sep}"
    at = text.find(start)
    if at < 0:
        return None
    head, found, payload = text[at:].partition(line_break + spec["payload_line"] + line_break)
    if not found:
        return None
    fields: dict[str, str] = {}
    for line in head.split(line_break):
        name, has_sep, value = line.partition(sep)
        for pattern in _loose_headers().get(name, []) if has_sep else []:
            if (match := pattern.fullmatch(value)) is not None:
                for key, got in match.groupdict().items():
                    fields.setdefault(key, got)
                break
    return fields, payload


def peer_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """The fields the peer form carries for an export record."""
    sender = record["sender"]
    return {"message_type": message_type(record["kind"]), "request_id": record.get("request_id"),
            "sender_name": sender["name"], "sender_agent_id": sender.get("agent_id"),
            "status": record.get("status"), "code": record.get("code")}


def collab_fields(record: Mapping[str, Any], recipient_path: str, sender: str) -> dict[str, Any]:
    """The fields the collaboration form carries: the recipient's path and the sender's path (or name)."""
    return {"message_type": message_type(record["kind"]), "recipient_path": recipient_path, "sender_path": sender}


def _applies(when: Mapping[str, Any] | None, kind: str, fields: Mapping[str, Any]) -> bool:
    if when is None:
        return True
    if "kind" in when:
        return kind == when["kind"]
    return bool(fields.get(when["field"])) != bool(when.get("absent"))


def deviations(envelope: Envelope, form: str, record: Mapping[str, Any], fields: Mapping[str, Any]) -> list[str]:
    """How ``envelope`` differs from the envelope the grammar prescribes for ``record`` in ``form`` with
    ``fields`` (:func:`peer_fields`, :func:`collab_fields`); empty when it is that envelope exactly."""
    if envelope.form != form:
        return [f"a {envelope.form} envelope, not a {form} one"]
    found = []
    for index, header in enumerate(grammar()["forms"][form]["headers"]):
        wanted, there = _applies(header.get("when"), record["kind"], fields), index in envelope.present
        if wanted != there:
            found.append(f"header {header['name']!r} ({header['value']}) is {'missing' if wanted else 'unexpected'}")
        elif there:
            found += [f"{header['name']} carries {name} {envelope.fields.get(name)!r}, not {fields.get(name)!r}"
                      for name in _PLACEHOLDER.findall(header["value"])
                      if envelope.fields.get(name) != str(fields.get(name))]
    if envelope.payload != record["body"]:
        found.append(f"the payload ({len(envelope.payload)} characters) is not the body exactly "
                     f"({len(record['body'])} characters)")
    return found


def prescribed(form: str, record: Mapping[str, Any], fields: Mapping[str, Any]) -> str:
    """The envelope text the grammar prescribes for ``record`` (what a search of a transcript looks for)."""
    spec = grammar()
    lines = [f"{header['name']}{spec['header_separator']}{header['value'].format_map(fields)}"
             for header in spec["forms"][form]["headers"] if _applies(header.get("when"), record["kind"], fields)]
    return spec["line_break"].join([*lines, spec["payload_line"], record["body"]])
