"""The capability declarations and their evaluation, and what probe checks enable: pure data, no Codex.

The boundaries are the ones measured on the published releases (see
``peerwire.codex.capabilities``); the live checks against real releases are in
``test_capabilities_live.py``.
"""

from __future__ import annotations

import pytest

from harness.codex.capability_probe import CapabilityReport, ProbeCheck
from peerwire.codex.capabilities import (DECLARATIONS, OPTIONAL_FIELDS, Assessment, Capability, Fact,
                                         declared_facts, evaluate, version_from_user_agent, version_key)


def all_facts() -> set[Fact]:
    return declared_facts()


@pytest.mark.parametrize("ordered", [
    ["0.58.0", "0.99.0", "0.105.0", "0.154.0-alpha.2", "0.154.0-alpha.10", "0.154.0", "0.160.1", "0.171.0", "1.0.0"],
])
def test_versions_order_numerically_with_pre_releases_first(ordered: list[str]) -> None:
    assert sorted(ordered, key=version_key) == ordered
    assert sorted(reversed(ordered), key=version_key) == ordered


@pytest.mark.parametrize("bad", ["", "0.171", "v0.171.0", "0.171.0.1", "latest", "0.171.0-"])
def test_a_non_version_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Codex version"):
        version_key(bad)


@pytest.mark.parametrize(("agent", "version"), [
    ("peerwire/0.171.0 (Debian 12.0.0; x86_64) xterm (peerwire; 0)", "0.171.0"),
    ("my client/0.160.1 (Mac OS 14; arm64)", None),  # a name with a space is not the form Codex writes
    ("peerwire/0.154.0-alpha.6 (Linux)", "0.154.0-alpha.6"),
    ("peerwire/0.171.0", "0.171.0"),
    ("<user-agent>", None),
    ("peerwire/latest (Linux)", None),
    (None, None),
    (17, None),
])
def test_the_server_version_is_read_from_the_user_agent(agent: object, version: str | None) -> None:
    assert version_from_user_agent(agent) == version


@pytest.mark.parametrize(("capability", "since", "before"), [
    (Capability.IDLE_START, "0.105.0", "0.104.0"),
    (Capability.INJECT, "0.121.0", "0.120.0"),
    (Capability.FORK, "0.80.0", "0.79.0"),
    (Capability.HISTORY_READ, "0.89.0", "0.87.0"),
    (Capability.MCP_STARTUP_STATUS, "0.117.0", "0.116.0"),
])
def test_a_version_below_the_declared_minimum_is_unsupported_naming_it(capability, since, before) -> None:
    assert DECLARATIONS[capability].since == since
    assert evaluate(since).allows(capability)
    verdict = evaluate(before).verdicts[capability]
    assert not verdict.supported
    assert since in verdict.reason and str(DECLARATIONS[capability].needs[0]) in verdict.reason


def test_a_capability_needs_what_it_requires() -> None:
    # turn/steer exists from 0.99.0, but reading a turn's final answer (phase) only from 0.105.0.
    steer = evaluate("0.100.0").verdicts[Capability.STEER]
    assert not steer.supported and "idle_start" in steer.reason
    assert evaluate("0.105.0").allows(Capability.STEER)
    assert not evaluate("0.100.0").allows(Capability.INTERRUPT)


def test_the_schema_outranks_the_version() -> None:
    offered = all_facts() - {Fact("thread/inject_items")}
    verdict = evaluate("0.171.0", offered).verdicts[Capability.INJECT]
    assert not verdict.supported and "thread/inject_items" in verdict.reason
    # ... and the version outranks the schema: offered facts below the declared minimum are not enough.
    assert not evaluate("0.120.0", all_facts()).allows(Capability.INJECT)
    # A field the schema lacks is as missing as a method.
    no_fence = all_facts() - {Fact("turn/steer", "expectedTurnId")}
    assert "turn/steer params.expectedTurnId" in evaluate("0.171.0", no_fence).verdicts[Capability.STEER].reason


def test_an_undeclared_minimum_is_never_supported_even_when_offered() -> None:
    assert DECLARATIONS[Capability.STEER_CONTEXT].since is None
    for offered in (None, all_facts()):
        verdict = evaluate("99.0.0", offered).verdicts[Capability.STEER_CONTEXT]
        assert not verdict.supported and "no Codex release" in verdict.reason


def test_the_pinned_version_supports_every_capability_with_a_known_minimum() -> None:
    assessment = evaluate("0.171.0", all_facts())
    assert set(assessment.supported()) == {c for c, d in DECLARATIONS.items() if d.since is not None}


@pytest.mark.parametrize(("version", "fields"), [
    ("0.135.0", set()),
    ("0.136.0", {("turn/start", "clientUserMessageId"), ("turn/steer", "clientUserMessageId")}),
    ("0.160.1", {("turn/start", "clientUserMessageId"), ("turn/steer", "clientUserMessageId"),
                 ("turn/start", "turnTrigger")}),
    ("0.162.0", {(f.method, f.field) for f in OPTIONAL_FIELDS}),
])
def test_optional_fields_are_sent_only_to_versions_that_know_them(version: str, fields: set) -> None:
    assessment = evaluate(version)
    assert set(assessment.fields) == fields
    assert assessment.accepts_field("turn/start", "parentTurnId") == (("turn/start", "parentTurnId") in fields)
    assert assessment.accepts_field("turn/start", "threadId")  # not optional: always sent
    # The schema can take a field away from a version that should have it.
    offered = all_facts() - {Fact("turn/start", "turnTrigger")}
    assert ("turn/start", "turnTrigger") not in evaluate("0.171.0", offered).fields


def test_narrowing_to_enabled_capabilities_keeps_the_unsupported_reasons() -> None:
    narrowed = evaluate("0.120.0").restricted_to(["idle_start", "inject"], "not proven")
    assert narrowed.supported() == [Capability.IDLE_START]
    assert "thread/inject_items" in narrowed.verdicts[Capability.INJECT].reason  # its own reason stays
    assert narrowed.verdicts[Capability.STEER].reason == "not proven"
    assert "0.120.0" in narrowed.refusal(Capability.STEER)
    with pytest.raises(ValueError, match="unknown capabilities.*'teleport'"):
        evaluate("0.171.0").restricted_to(["teleport"], "x")


def test_an_unknown_version_refuses_nothing() -> None:
    unchecked = Assessment.unchecked()
    assert set(unchecked.supported()) == set(Capability)
    assert all(unchecked.accepts_field(f.method, f.field) for f in OPTIONAL_FIELDS)
    assert unchecked.restricted_to([], "off").supported() == []


def test_every_capability_is_declared_once_with_needs() -> None:
    assert set(DECLARATIONS) == set(Capability)
    for capability, declaration in DECLARATIONS.items():
        assert declaration.capability == capability and declaration.needs and declaration.summary
        assert declaration.since is None or version_key(declaration.since)
        assert all(required in DECLARATIONS for required in declaration.requires)


# -- what a probe's checks enable (harness.codex.capability_probe) -----------------------------------------


def report_with(*checks: ProbeCheck, version: str = "0.171.0") -> CapabilityReport:
    return CapabilityReport(version, evaluate(version, all_facts()), frozenset(all_facts()), checks=list(checks))


COMMON = (ProbeCheck("connection", None, True, "ok"), ProbeCheck("attachment", None, True, "ok"))


def test_eligibility_alone_enables_nothing() -> None:
    assert report_with().enabled() == []
    assert report_with(*COMMON).enabled() == []  # connected and attached, but no input was tried
    assert report_with(*COMMON).why_not(Capability.INJECT) == "the live probe did not check it"


def test_a_capability_is_enabled_by_its_own_passing_check() -> None:
    report = report_with(*COMMON, ProbeCheck("idle start", Capability.IDLE_START, True, "ok"),
                         ProbeCheck("steer", Capability.STEER, False, "a steer fenced by another turn was accepted"))
    assert report.enabled() == [Capability.IDLE_START]
    assert report.why_not(Capability.STEER) == ("the live probe failed: steer: a steer fenced by another turn was "
                                                "accepted")
    assert report.summary().startswith("idle_start ✓ steer ✗")


def test_a_failed_connection_or_attachment_enables_nothing() -> None:
    attached_badly = report_with(COMMON[0], ProbeCheck("attachment", None, False, "no thread"),
                                 ProbeCheck("idle start", Capability.IDLE_START, True, "ok"))
    assert attached_badly.enabled() == []
    assert attached_badly.why_not(Capability.IDLE_START) == "the live probe failed: attachment: no thread"


def test_a_passing_check_does_not_enable_what_the_version_lacks() -> None:
    report = report_with(*COMMON, ProbeCheck("inject", Capability.INJECT, True, "ok"), version="0.120.0")
    assert report.enabled() == []
    assert "0.121.0" in (report.why_not(Capability.INJECT) or "")


def test_a_report_survives_its_json() -> None:
    report = report_with(*COMMON, ProbeCheck("idle start", Capability.IDLE_START, True, "ok"))
    again = CapabilityReport.from_json(report.to_json())
    assert again.to_json() == report.to_json() and again.enabled() == [Capability.IDLE_START]


def test_every_answer_the_probe_model_gives_inside_the_held_turn_is_held():
    """The held turn must stay open until the probe interrupts it (or releases it): the steer joins the turn and
    Codex asks again with the steer as its newest input, so an answer to that request must wait on the hold too,
    or the turn completes before the interrupt lands and the capability is not proven, on a busy machine only."""
    from harness.codex.capability_probe import _HOLD, _STEER, PROBE_AGENT, probe_model_document

    rules = probe_model_document()["rules"][PROBE_AGENT]
    inside = [rule for rule in rules
              if any(marker in str(rule["when"]) for marker in (_HOLD, _STEER))]
    assert {rule["id"] for rule in inside} == {"held", "steered"}
    assert all(rule.get("hold") == "probe" for rule in inside), inside
