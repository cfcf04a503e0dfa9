"""Tool discovery and the text mirror of results."""

from __future__ import annotations

import json

from harness.contract.fixtures import call_s, tool_call
from harness.contract.manifest import requirement
from harness.contract.schemas import TOOL_NAMES, schema_differences



def _advertised(servers) -> dict[str, dict]:
    response = servers.start().server.call("tools/list", {}, timeout=call_s())
    tools = response.get("result", {}).get("tools")
    assert isinstance(tools, list), f"tools/list: {response}"
    return {t.get("name"): t for t in tools if isinstance(t, dict)}


@requirement("tools:list:names")
def test_tools_list_names_every_tool(servers):
    advertised = _advertised(servers)
    missing = [name for name in TOOL_NAMES if name not in advertised]
    assert not missing, f"tools/list lacks {missing}; it lists {sorted(map(str, advertised))}"


@requirement("tools:list:schemas")
def test_every_tool_has_input_and_output_schemas(servers):
    advertised = _advertised(servers)
    for name in TOOL_NAMES:
        tool = advertised.get(name, {})
        for key in ("inputSchema", "outputSchema"):
            schema = tool.get(key)
            assert isinstance(schema, dict) and schema.get("type") == "object", f"{name}.{key}: {schema}"


@requirement("tools:list:contract-schemas")
def test_advertised_schemas_are_the_contract(servers):
    differences = schema_differences(_advertised(servers), "messaging")
    assert not differences, "the advertised schemas admit other values than contracts/tools:\n  " + \
        "\n  ".join(differences)


@requirement("tools:result:text-mirror")
def test_successful_results_mirror_structured_content_as_text(servers):
    peer = servers.caller("peer")
    endpoint = servers.start()
    for name, arguments in (("list_agents", {}), ("send_message", {"target": peer.name, "message": "mirror\r\nme ✓"}),
                            ("receive_messages", {}), ("wait_agent", {"timeout_ms": 0})):
        outcome = tool_call(endpoint, name, arguments)
        result = outcome.result
        assert result is not None and not outcome.is_error, f"{name}: {outcome.response}"
        texts = [c.get("text") for c in result.get("content", []) if isinstance(c, dict) and c.get("type") == "text"]
        mirrored = []
        for text in texts:
            try:
                mirrored.append(json.loads(text))
            except (TypeError, ValueError):
                continue
        assert result.get("structuredContent") in mirrored, f"{name}: no text item holds the structured JSON: {texts}"
