// cardex as the client-side tool search of Claude (Anthropic Messages API).
//
// Claude starts with one tool, search_tools. When it calls it, the
// orchestrator asks cardex (DiscoverTools, format anthropic_tool_reference)
// and sends back cardex's answer as it is: a tool_result of tool_reference
// blocks, while the tools array gains their definitions with
// defer_loading: true. Claude then calls the tool it needs by its provider
// name, and cardex authorizes the call (AuthorizeCall takes that name back)
// before the orchestrator runs it.
//
//   CARDEX_HTTP_URL   cardex's HTTP listener (default http://127.0.0.1:8080)
//   CARDEX_TOKEN      a discover token bound to the caller
//   ANTHROPIC_API_KEY and, optionally, ANTHROPIC_BASE_URL (read by the SDK)
import Anthropic from "@anthropic-ai/sdk";
import type {
  ContentBlock,
  MessageParam,
  Tool,
  ToolResultBlockParam,
} from "@anthropic-ai/sdk/resources/messages";
import { createCardex, providerAnswer, providerDefinitions } from "@cardex/client";

const cardex = createCardex({
  baseUrl: process.env.CARDEX_HTTP_URL ?? "http://127.0.0.1:8080",
  token: process.env.CARDEX_TOKEN,
  timeoutMs: 10_000,
});
const claude = new Anthropic();

// The one tool Claude sees up front.
const searchTools: Tool = {
  name: "search_tools",
  description:
    "Find the tools for a task among the hundreds available. Give the request in plain words; " +
    "for a task of several steps, also give each step as an intent.",
  input_schema: {
    type: "object",
    properties: {
      query: { type: "string", description: "What the user wants done." },
      intents: { type: "array", items: { type: "string" }, description: "The steps of a multi-step task." },
    },
    required: ["query"],
  },
};

const tools: Tool[] = [searchTools];
const messages: MessageParam[] = [{ role: "user", content: "Where is my package? The order is A-1001." }];
let discoveryId = "";

async function answer(block: Extract<ContentBlock, { type: "tool_use" }>): Promise<ToolResultBlockParam> {
  if (block.name === searchTools.name) {
    const input = block.input as { query: string; intents?: string[] };
    const found = await cardex.discovery.discoverTools({
      query: input.query,
      intents: input.intents ?? [],
      topK: 5,
      format: "anthropic_tool_reference",
      callId: block.id,
    });
    discoveryId = found.discoveryId;
    console.log(`cardex shortlist for "${input.query}": ${found.tools.map((t) => t.providerName).join(", ")}`);
    // Deferred definitions go into the tools array; only the referenced ones load.
    for (const def of providerDefinitions<Tool>(found)) {
      if (!tools.some((t) => t.name === def.name)) tools.push(def);
    }
    return providerAnswer<ToolResultBlockParam>(found);
  }
  // A real tool: cardex authorizes the call by the name Claude used.
  const authz = await cardex.discovery.authorizeCall({
    name: block.name,
    argumentsJson: JSON.stringify(block.input),
    discoveryId,
  });
  if (!authz.allowed) {
    return { type: "tool_result", tool_use_id: block.id, is_error: true, content: authz.message };
  }
  console.log(`cardex authorized ${authz.tool?.server}/${authz.tool?.name} (card version ${authz.cardVersion})`);
  // Here your execution gateway runs the tool; this example answers for it.
  const result = { order_id: "A-1001", status: "in_transit", eta: "Thursday" };
  return { type: "tool_result", tool_use_id: block.id, content: JSON.stringify(result) };
}

for (let turn = 0; turn < 8; turn++) {
  const msg = await claude.messages.create({ model: "claude-sonnet-5", max_tokens: 1024, tools, messages });
  messages.push({ role: "assistant", content: msg.content });
  if (msg.stop_reason !== "tool_use") {
    for (const block of msg.content) if (block.type === "text") console.log(`Claude: ${block.text}`);
    break;
  }
  const results: ToolResultBlockParam[] = [];
  for (const block of msg.content) {
    if (block.type === "tool_use") results.push(await answer(block));
  }
  messages.push({ role: "user", content: results });
}
