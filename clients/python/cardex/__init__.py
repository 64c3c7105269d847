"""A client of cardex's API over HTTP/JSON, with the standard library only.

cardex serves every RPC of its gRPC services as JSON over HTTP on its HTTP
listener (the Connect protocol: POST /cardex.v1.SERVICE/METHOD with the
request as proto3 JSON). This module calls them with urllib: field names are
the protos' JSON names (lowerCamelCase, e.g. ``topK``), int64 values are
strings, and an error is a :class:`CardexError` carrying the gRPC code. See
README.md beside this package and docs/INTEGRATIONS.md.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Iterable, Optional

__all__ = ["Cardex", "CardexError", "FORMATS"]

#: The provider formats of DiscoverToolsRequest.format.
FORMATS = ("anthropic_tool_reference", "anthropic_tools", "openai_tool_search", "openai_functions")

JSON = dict[str, Any]


class CardexError(Exception):
    """A call that cardex refused or could not answer.

    ``code`` is the gRPC code in snake case (``invalid_argument``,
    ``unauthenticated``, ``permission_denied``, ``not_found``,
    ``resource_exhausted``, ...), ``status`` the HTTP status, ``details`` the
    Connect error details (a RetryInfo on ``resource_exhausted``).
    """

    def __init__(self, code: str, message: str, status: int, details: Optional[list] = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details or []


class Cardex:
    """cardex at ``base_url`` (its HTTP listener, e.g. ``http://127.0.0.1:8080``).

    ``token`` is sent as ``Authorization: Bearer TOKEN``: a service token or
    JWT for DiscoveryService and CatalogService, an agent token for
    ExecutionService. ``timeout`` (seconds) bounds each call on both sides:
    it is sent as the call's deadline (Connect-Timeout-Ms).
    """

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- the wire ---------------------------------------------------------

    def call(self, service: str, method: str, request: Optional[JSON] = None) -> JSON:
        """Calls SERVICE/METHOD (e.g. ``"DiscoveryService", "DiscoverTools"``)
        with a request in proto3 JSON and returns the response as a dict."""
        if "." not in service:
            service = "cardex.v1." + service
        body = json.dumps(request or {}).encode()
        headers = {
            "Content-Type": "application/json",
            "Connect-Protocol-Version": "1",
            "Connect-Timeout-Ms": str(int(self.timeout * 1000)),
        }
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(f"{self.base_url}/{service}/{method}", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)
            except ValueError:
                raise CardexError("unknown", raw.decode(errors="replace").strip(), e.code) from None
            raise CardexError(err.get("code", "unknown"), err.get("message", ""), e.code, err.get("details")) from None

    # -- DiscoveryService -------------------------------------------------

    def discover_tools(self, query: str = "", *, intents: Optional[Iterable[str]] = None, top_k: int = 0,
                       format: str = "", call_id: str = "", caller: Optional[JSON] = None, **fields: Any) -> JSON:
        """DiscoverTools: the shortlist for a request (and its intents).

        With ``format`` (one of :data:`FORMATS`) every tool carries its
        ``definitionJson`` and the response its ``providerJson``; see
        :meth:`definitions` and :meth:`provider_answer`. ``caller`` is needed
        only when the token is not bound to one. Other request fields go in
        ``fields`` by their JSON names (``alwaysLoad``, ``minConfidence``).
        """
        req: JSON = {"query": query, **fields}
        if intents:
            req["intents"] = list(intents)
        if top_k:
            req["topK"] = top_k
        if format:
            req["format"] = format
        if call_id:
            req["callId"] = call_id
        if caller:
            req["caller"] = caller
        return self.call("DiscoveryService", "DiscoverTools", req)

    def search_tools(self, query: str = "", *, page_size: int = 0, cursor: str = "", caller: Optional[JSON] = None) -> JSON:
        """SearchTools: names and summaries only, paginated (``nextCursor``)."""
        req: JSON = {"query": query, "pageSize": page_size, "cursor": cursor}
        if caller:
            req["caller"] = caller
        return self.call("DiscoveryService", "SearchTools", req)

    def describe_tool(self, name: str, server: str = "", *, caller: Optional[JSON] = None) -> JSON:
        """DescribeTool: one card with its schemas. ``name`` may be a provider name."""
        req: JSON = {"name": name, "server": server}
        if caller:
            req["caller"] = caller
        return self.call("DiscoveryService", "DescribeTool", req)

    def authorize_call(self, name: str, arguments: Optional[JSON] = None, *, server: str = "", discovery_id: str = "",
                       caller: Optional[JSON] = None) -> JSON:
        """AuthorizeCall: the execution gateway's check. ``name`` may be the
        provider name the model called the tool by. The answer's ``decision``
        is ``DECISION_ALLOW`` or a ``DECISION_DENY_*``."""
        req: JSON = {"name": name, "server": server, "argumentsJson": json.dumps(arguments or {}),
                     "discoveryId": discovery_id}
        if caller:
            req["caller"] = caller
        return self.call("DiscoveryService", "AuthorizeCall", req)

    def report_outcome(self, discovery_id: str, *, used_tool: Optional[str] = None, server: str = "",
                       none_fit: bool = False, caller: Optional[JSON] = None) -> JSON:
        """ReportOutcome: which tool the turn used (by name or provider name), or that none fit."""
        req: JSON = {"discoveryId": discovery_id}
        if used_tool:
            req["usedTool"] = {"name": used_tool, "server": server}
        elif none_fit:
            req["noneFit"] = True
        if caller:
            req["caller"] = caller
        return self.call("DiscoveryService", "ReportOutcome", req)

    # -- provider hooks ---------------------------------------------------

    @staticmethod
    def definitions(discovery: JSON) -> list[JSON]:
        """The shortlist's tool definitions in the discovery's format."""
        return [json.loads(t["definitionJson"]) for t in discovery.get("tools", [])]

    @staticmethod
    def provider_answer(discovery: JSON) -> Any:
        """The answer to hand the provider in the discovery's format: Anthropic's
        tool_result block, OpenAI's tool_search_output item, or the definitions."""
        if not discovery.get("providerJson"):
            raise ValueError("the discovery asked for no format")
        return json.loads(discovery["providerJson"])

    def retrieve_tools(self, query: str, intents: Optional[Iterable[str]] = None, *, limit: int = 5) -> list[str]:
        """LangGraph-bigtool style retrieval: the names of the tools to bind
        for this request, best first.

        The names are provider names (``SERVER__NAME``, or a hashed stand-in
        for names no provider accepts), valid tool names for Anthropic and
        OpenAI and taken back by :meth:`authorize_call` and
        :meth:`describe_tool` (:meth:`retrieve_definitions` returns their
        definitions too). Pass ``intents`` for a multi-step request:
        every step gets its tools.
        """
        res = self.discover_tools(query, intents=intents, top_k=limit)
        return [t["providerName"] for t in res.get("tools", [])]

    def retrieve_definitions(self, query: str, intents: Optional[Iterable[str]] = None, *, limit: int = 5,
                             format: str = "openai_functions") -> dict[str, JSON]:
        """:meth:`retrieve_tools` with the definitions: provider name →
        tool definition in ``format`` (``anthropic_tools`` or
        ``openai_functions``), best first, ready for the model request."""
        res = self.discover_tools(query, intents=intents, top_k=limit, format=format)
        return {t["providerName"]: json.loads(t["definitionJson"]) for t in res.get("tools", [])}

    # -- CatalogService and ExecutionService ------------------------------

    def catalog(self, method: str, request: Optional[JSON] = None) -> JSON:
        """A CatalogService call (PutCards, GetCard, ListCards, DeleteCard,
        PutServers, ListServers, DeleteServer), with a catalog or admin token."""
        return self.call("CatalogService", method, request)

    def execution(self, method: str, request: Optional[JSON] = None) -> JSON:
        """An ExecutionService call (SearchTools, DescribeTool, CallTool,
        ListTools), with an agent token."""
        return self.call("ExecutionService", method, request)

    def health(self, service: str = "") -> str:
        """The health status (``SERVING``, ``NOT_SERVING``) of the server or one service."""
        return self.call("grpc.health.v1.Health", "Check", {"service": service}).get("status", "")
