// Runs against a real `cardex serve` with the example catalogue loaded (the
// Go test cmd/cardex TestClientsAndExamples starts it and sets the env).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  AuthorizeCallResponse_Decision,
  Code,
  ConnectError,
  createCardex,
  providerAnswer,
  providerDefinitions,
} from "../src/index.js";

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through the Go test (cmd/cardex TestClientsAndExamples)`);
  return v;
}

const baseUrl = env("CARDEX_HTTP_URL");
const cardex = createCardex({ baseUrl, token: env("CARDEX_TOKEN"), timeoutMs: 10_000 });

test("DiscoverTools answers a typed shortlist", async () => {
  const res = await cardex.discovery.discoverTools({ query: "where is my package", topK: 3 });
  assert.ok(res.discoveryId.length > 0);
  assert.ok(res.tools.length > 0 && res.tools.length <= 3);
  const names = res.tools.map((t) => `${t.card?.server}/${t.card?.name}`);
  assert.ok(names.includes("orders/track_shipment"), names.join(", "));
  assert.equal(typeof res.tokens?.catalogTokens, "bigint");
  for (const t of res.tools) assert.equal(t.providerName, `${t.card?.server}__${t.card?.name}`);
});

test("provider formats come back parsed", async () => {
  const res = await cardex.discovery.discoverTools({
    query: "where is my package", topK: 2, format: "openai_tool_search", callId: "call_1",
  });
  const answer = providerAnswer<{ type: string; call_id: string; tools: { name: string }[] }>(res);
  assert.equal(answer.type, "tool_search_output");
  assert.equal(answer.call_id, "call_1");
  assert.deepEqual(answer.tools.map((t) => t.name), res.tools.map((t) => t.providerName));
  const defs = providerDefinitions<{ type: string; parameters: unknown }>(res);
  assert.ok(defs.every((d) => d.type === "function" && d.parameters));
});

test("AuthorizeCall takes the provider name back", async () => {
  const found = await cardex.discovery.discoverTools({ query: "track a shipment", topK: 1 });
  const tool = found.tools[0];
  const res = await cardex.discovery.authorizeCall({
    name: tool.providerName, argumentsJson: JSON.stringify({ order_id: "A-1001" }), discoveryId: found.discoveryId,
  });
  assert.equal(res.decision, AuthorizeCallResponse_Decision.ALLOW, res.message);
  assert.equal(res.tool?.name, tool.card?.name);
});

test("errors are ConnectErrors with the gRPC code", async () => {
  const anonymous = createCardex({ baseUrl });
  await assert.rejects(anonymous.discovery.discoverTools({ query: "x" }), (e: unknown) => {
    assert.ok(e instanceof ConnectError);
    assert.equal(e.code, Code.Unauthenticated);
    return true;
  });
  await assert.rejects(cardex.discovery.discoverTools({ query: "x", topK: 1000 }), (e: unknown) => {
    assert.ok(e instanceof ConnectError);
    assert.equal(e.code, Code.InvalidArgument);
    assert.match(e.message, /top_k/);
    return true;
  });
});

test("CatalogService and ExecutionService", async () => {
  const admin = createCardex({ baseUrl, token: env("CARDEX_ADMIN_TOKEN") });
  const cards = await admin.catalog.listCards({ tenant: "acme", server: "orders" });
  assert.ok(cards.cards.some((c) => c.name === "track_shipment"));
  const agent = createCardex({ baseUrl, token: env("CARDEX_AGENT_TOKEN") });
  const found = await agent.execution.searchTools({ query: "where is my package", limit: 3 });
  assert.ok(found.tools.some((t) => t.name === "track_shipment"));
});
