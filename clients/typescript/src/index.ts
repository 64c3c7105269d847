// A typed client of cardex's API: DiscoveryService, CatalogService and
// ExecutionService over HTTP/JSON (the Connect protocol, which cardex serves
// on its HTTP listener beside /mcp), with the messages generated from the
// protos by buf (protoc-gen-es). See README.md.
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { CatalogService } from "./gen/cardex/v1/catalog_pb.js";
import { DiscoveryService, type DiscoverToolsResponse } from "./gen/cardex/v1/discovery_pb.js";
import { ExecutionService } from "./gen/cardex/v1/execution_pb.js";

export * from "./gen/cardex/v1/card_pb.js";
export * from "./gen/cardex/v1/catalog_pb.js";
export * from "./gen/cardex/v1/discovery_pb.js";
export * from "./gen/cardex/v1/execution_pb.js";
export { Code, ConnectError } from "@connectrpc/connect";

/** Where cardex is and how to authenticate. */
export interface CardexOptions {
  /** The HTTP listener, e.g. "http://127.0.0.1:8080" (cardex serve --http-listen). */
  baseUrl: string;
  /**
   * Sent as "Authorization: Bearer TOKEN": a service token or JWT for
   * DiscoveryService and CatalogService, an agent token for ExecutionService.
   */
  token?: string;
  /** Deadline of each call in milliseconds (sent as Connect-Timeout-Ms). */
  timeoutMs?: number;
  /** Proto3 JSON on the wire (true, the default) or binary protobuf. */
  json?: boolean;
}

/** The three services of cardex, typed. */
export interface Cardex {
  discovery: Client<typeof DiscoveryService>;
  catalog: Client<typeof CatalogService>;
  execution: Client<typeof ExecutionService>;
}

/** Clients of cardex's services at opts.baseUrl. */
export function createCardex(opts: CardexOptions): Cardex {
  const interceptors: Interceptor[] = [];
  if (opts.token) {
    const bearer = `Bearer ${opts.token}`;
    interceptors.push((next) => (req) => {
      req.header.set("Authorization", bearer);
      return next(req);
    });
  }
  const transport = createConnectTransport({
    baseUrl: opts.baseUrl,
    httpVersion: opts.baseUrl.startsWith("https:") ? "2" : "1.1",
    useBinaryFormat: opts.json === false,
    defaultTimeoutMs: opts.timeoutMs,
    interceptors,
  });
  return {
    discovery: createClient(DiscoveryService, transport),
    catalog: createClient(CatalogService, transport),
    execution: createClient(ExecutionService, transport),
  };
}

/**
 * The shortlist's tool definitions in the format the discovery asked for
 * (DiscoverToolsRequest.format): what goes into the provider request's tools.
 */
export function providerDefinitions<T = Record<string, unknown>>(res: DiscoverToolsResponse): T[] {
  return res.tools.map((t) => JSON.parse(t.definitionJson) as T);
}

/**
 * The answer to hand the provider for the format the discovery asked for:
 * Anthropic's tool_result block, OpenAI's tool_search_output item, or the
 * definitions' array.
 */
export function providerAnswer<T = unknown>(res: DiscoverToolsResponse): T {
  if (!res.providerJson) {
    throw new Error("the discovery asked for no format (DiscoverToolsRequest.format)");
  }
  return JSON.parse(res.providerJson) as T;
}
