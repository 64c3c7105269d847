"""cardex as the client-side tool search of Claude, with the standard library.

Claude starts with one tool, search_tools. When it calls it, the orchestrator
asks cardex (DiscoverTools, format anthropic_tool_reference) and sends back
cardex's answer as it is: a tool_result of tool_reference blocks, while the
request's tools gain their definitions with defer_loading: true. Claude then
calls the tool it needs by its provider name, and cardex authorizes the call
(AuthorizeCall takes that name back) before the orchestrator runs it.

  CARDEX_HTTP_URL    cardex's HTTP listener (default http://127.0.0.1:8080)
  CARDEX_TOKEN       a discover token bound to the caller
  ANTHROPIC_API_KEY  and, optionally, ANTHROPIC_BASE_URL
"""

import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from cardex import Cardex  # noqa: E402

API = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com").rstrip("/")
cardex = Cardex(os.environ.get("CARDEX_HTTP_URL", "http://127.0.0.1:8080"), os.environ.get("CARDEX_TOKEN"), timeout=10)


def create_message(**body):
    """POST /v1/messages, the Messages API's wire protocol."""
    req = urllib.request.Request(API + "/v1/messages", data=json.dumps(body).encode(), method="POST", headers={
        "x-api-key": os.environ["ANTHROPIC_API_KEY"],
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    })
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


SEARCH_TOOLS = {
    "name": "search_tools",
    "description": "Find the tools for a task among the hundreds available. Give the request in plain words; "
                   "for a task of several steps, also give each step as an intent.",
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the user wants done."},
            "intents": {"type": "array", "items": {"type": "string"}, "description": "The steps of a multi-step task."},
        },
        "required": ["query"],
    },
}

tools = [SEARCH_TOOLS]
messages = [{"role": "user", "content": "Where is my package? The order is A-1001."}]
discovery_id = ""


def answer(block):
    global discovery_id
    if block["name"] == SEARCH_TOOLS["name"]:
        query = block["input"]["query"]
        found = cardex.discover_tools(query, intents=block["input"].get("intents"), top_k=5,
                                      format="anthropic_tool_reference", call_id=block["id"])
        discovery_id = found["discoveryId"]
        print(f'cardex shortlist for "{query}": ' + ", ".join(t["providerName"] for t in found["tools"]))
        known = {t["name"] for t in tools}
        tools.extend(d for d in Cardex.definitions(found) if d["name"] not in known)  # defer_loading: true
        return Cardex.provider_answer(found)  # the tool_result block
    authz = cardex.authorize_call(block["name"], block["input"], discovery_id=discovery_id)
    if authz.get("decision") != "DECISION_ALLOW":
        return {"type": "tool_result", "tool_use_id": block["id"], "is_error": True, "content": authz.get("message", "")}
    tool = authz["tool"]
    print(f'cardex authorized {tool["server"]}/{tool["name"]} (card version {authz.get("cardVersion")})')
    # Here your execution gateway runs the tool; this example answers for it.
    result = {"order_id": "A-1001", "status": "in_transit", "eta": "Thursday"}
    return {"type": "tool_result", "tool_use_id": block["id"], "content": json.dumps(result)}


for _ in range(8):
    msg = create_message(model="claude-sonnet-5", max_tokens=1024, tools=tools, messages=messages)
    messages.append({"role": "assistant", "content": msg["content"]})
    if msg["stop_reason"] != "tool_use":
        print("Claude: " + "".join(b["text"] for b in msg["content"] if b["type"] == "text"))
        break
    messages.append({"role": "user", "content": [answer(b) for b in msg["content"] if b["type"] == "tool_use"]})
