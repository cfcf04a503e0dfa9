"""The collaboration profile's tool discovery (``--collab-server-cmd``).

Discovery needs no caller: the server is launched without any caller
environment, as Codex does before its first call.
"""

from __future__ import annotations

from harness.contract.fixtures import call_s
from harness.contract.manifest import requirement
from harness.contract.schemas import COLLAB_TOOL_NAMES, schema_differences



def _advertised(servers) -> list[dict]:
    endpoint = servers.start(env=servers.bare_env(), profile="collab")
    response = endpoint.server.call("tools/list", {}, timeout=call_s())
    tools = response.get("result", {}).get("tools")
    assert isinstance(tools, list), f"tools/list: {response}"
    return [t for t in tools if isinstance(t, dict)]


@requirement("collab:tools:list")
def test_collab_tools_are_exactly_the_six(servers):
    advertised = _advertised(servers)
    names = [t.get("name") for t in advertised]
    assert sorted(map(str, names)) == sorted(COLLAB_TOOL_NAMES), \
        f"the collab profile lists {names}, not exactly {list(COLLAB_TOOL_NAMES)}"
    for tool in advertised:
        for key in ("inputSchema", "outputSchema"):
            schema = tool.get(key)
            assert isinstance(schema, dict) and schema.get("type") == "object", f"{tool['name']}.{key}: {schema}"


@requirement("collab:tools:contract-schemas")
def test_collab_schemas_are_the_contract(servers):
    advertised = {t.get("name"): t for t in _advertised(servers)}
    differences = schema_differences(advertised, "collab")
    assert not differences, "the advertised schemas admit other values than contracts/collab:\n  " + \
        "\n  ".join(differences)
    timeout = advertised["wait_agent"]["inputSchema"]["properties"]["timeout_ms"]
    assert timeout.get("type") == "number", f"wait_agent.timeout_ms is typed number (Codex rejects integer): {timeout}"
