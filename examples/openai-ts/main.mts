// cardex as the client-executed tool_search of OpenAI's Responses API.
//
// The model starts with one tool, tool_search with execution "client". When
// it emits a tool_search_call, the orchestrator asks cardex (DiscoverTools,
// format openai_tool_search, the call's call_id) and hands back cardex's
// answer as it is: the tool_search_output item carrying the function
// definitions to load. The model then calls a function by its provider name,
// and cardex authorizes the call (AuthorizeCall takes that name back) before
// the orchestrator runs it.
//
//   CARDEX_HTTP_URL   cardex's HTTP listener (default http://127.0.0.1:8080)
//   CARDEX_TOKEN      a discover token bound to the caller
//   OPENAI_API_KEY and, optionally, OPENAI_BASE_URL (read by the SDK)
import OpenAI from "openai";
import type {
  ResponseInputItem,
  ResponseToolSearchOutputItemParam,
  Tool,
} from "openai/resources/responses/responses";
import { createCardex, providerAnswer } from "@cardex/client";

const cardex = createCardex({
  baseUrl: process.env.CARDEX_HTTP_URL ?? "http://127.0.0.1:8080",
  token: process.env.CARDEX_TOKEN,
  timeoutMs: 10_000,
});
const openai = new OpenAI();

const tools: Tool[] = [
  {
    type: "tool_search",
    execution: "client",
    description:
      "Find the tools for a task among the hundreds available. Give the request in plain words; " +
      "for a task of several steps, also give each step as an intent.",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "What the user wants done." },
        intents: { type: "array", items: { type: "string" }, description: "The steps of a multi-step task." },
      },
      required: ["query"],
      additionalProperties: false,
    },
  },
];
const input: ResponseInputItem[] = [{ role: "user", content: "Where is my package? The order is A-1001." }];
let discoveryId = "";

for (let turn = 0; turn < 8; turn++) {
  const res = await openai.responses.create({ model: "gpt-5.4", tools, input });
  let called = false;
  for (const item of res.output) {
    if (item.type === "tool_search_call") {
      called = true;
      input.push({ type: "tool_search_call", id: item.id, call_id: item.call_id, execution: item.execution, arguments: item.arguments, status: item.status });
      const args = item.arguments as { query: string; intents?: string[] };
      const found = await cardex.discovery.discoverTools({
        query: args.query,
        intents: args.intents ?? [],
        topK: 5,
        format: "openai_tool_search",
        callId: item.call_id ?? "",
      });
      discoveryId = found.discoveryId;
      console.log(`cardex shortlist for "${args.query}": ${found.tools.map((t) => t.providerName).join(", ")}`);
      input.push(providerAnswer<ResponseToolSearchOutputItemParam>(found));
    } else if (item.type === "function_call") {
      called = true;
      input.push(item);
      const authz = await cardex.discovery.authorizeCall({ name: item.name, argumentsJson: item.arguments, discoveryId });
      let output = authz.message;
      if (authz.allowed) {
        console.log(`cardex authorized ${authz.tool?.server}/${authz.tool?.name} (card version ${authz.cardVersion})`);
        // Here your execution gateway runs the tool; this example answers for it.
        output = JSON.stringify({ order_id: "A-1001", status: "in_transit", eta: "Thursday" });
      }
      input.push({ type: "function_call_output", call_id: item.call_id, output });
    }
  }
  if (!called) {
    console.log(`model: ${res.output_text}`);
    break;
  }
}
