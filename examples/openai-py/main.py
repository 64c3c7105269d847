"""cardex as the client-executed tool_search of OpenAI's Responses API, with
the standard library.

The model starts with one tool, tool_search with execution "client". When it
emits a tool_search_call, the orchestrator asks cardex (DiscoverTools, format
openai_tool_search, the call's call_id) and hands back cardex's answer as it
is: the tool_search_output item carrying the function definitions to load.
The model then calls a function by its provider name, and cardex authorizes
the call (AuthorizeCall takes that name back) before the orchestrator runs it.

  CARDEX_HTTP_URL  cardex's HTTP listener (default http://127.0.0.1:8080)
  CARDEX_TOKEN     a discover token bound to the caller
  OPENAI_API_KEY   and, optionally, OPENAI_BASE_URL
"""

import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from cardex import Cardex  # noqa: E402

API = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
cardex = Cardex(os.environ.get("CARDEX_HTTP_URL", "http://127.0.0.1:8080"), os.environ.get("CARDEX_TOKEN"), timeout=10)


def create_response(**body):
    """POST /v1/responses, the Responses API's wire protocol."""
    req = urllib.request.Request(API + "/responses", data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
        "Content-Type": "application/json",
    })
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


TOOLS = [{
    "type": "tool_search",
    "execution": "client",
    "description": "Find the tools for a task among the hundreds available. Give the request in plain words; "
                   "for a task of several steps, also give each step as an intent.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the user wants done."},
            "intents": {"type": "array", "items": {"type": "string"}, "description": "The steps of a multi-step task."},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}]
items = [{"role": "user", "content": "Where is my package? The order is A-1001."}]
discovery_id = ""

for _ in range(8):
    res = create_response(model="gpt-5.4", tools=TOOLS, input=items)
    called = False
    for item in res["output"]:
        if item["type"] == "tool_search_call":
            called = True
            items.append(item)
            args = item["arguments"]
            found = cardex.discover_tools(args["query"], intents=args.get("intents"), top_k=5,
                                          format="openai_tool_search", call_id=item["call_id"])
            discovery_id = found["discoveryId"]
            print(f'cardex shortlist for "{args["query"]}": ' + ", ".join(t["providerName"] for t in found["tools"]))
            items.append(Cardex.provider_answer(found))  # the tool_search_output item
        elif item["type"] == "function_call":
            called = True
            items.append(item)
            authz = cardex.authorize_call(item["name"], json.loads(item["arguments"]), discovery_id=discovery_id)
            output = authz.get("message", "")
            if authz.get("decision") == "DECISION_ALLOW":
                tool = authz["tool"]
                print(f'cardex authorized {tool["server"]}/{tool["name"]} (card version {authz.get("cardVersion")})')
                # Here your execution gateway runs the tool; this example answers for it.
                output = json.dumps({"order_id": "A-1001", "status": "in_transit", "eta": "Thursday"})
            items.append({"type": "function_call_output", "call_id": item["call_id"], "output": output})
    if not called:
        text = "".join(c.get("text", "") for o in res["output"] if o["type"] == "message" for c in o["content"])
        print("model: " + text)
        break
