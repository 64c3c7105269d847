"""Runs against a real `cardex serve` with the example catalogue loaded: the
Go test cmd/cardex TestClientsAndExamples starts it and sets the env."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from cardex import FORMATS, Cardex, CardexError  # noqa: E402


def env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        raise unittest.SkipTest(f"{name} is not set: run through the Go test (cmd/cardex TestClientsAndExamples)")
    return v


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.url = env("CARDEX_HTTP_URL")
        cls.cardex = Cardex(cls.url, env("CARDEX_TOKEN"), timeout=10)

    def test_discover(self):
        res = self.cardex.discover_tools("where is my package", top_k=3)
        names = [f'{t["card"]["server"]}/{t["card"]["name"]}' for t in res["tools"]]
        self.assertIn("orders/track_shipment", names)
        self.assertLessEqual(len(names), 3)
        self.assertTrue(res["discoveryId"])
        self.assertIsInstance(res["tokens"]["catalogTokens"], str)  # int64 as a string

    def test_formats(self):
        for f in FORMATS:
            call_id = "toolu_9" if f in ("anthropic_tool_reference", "openai_tool_search") else ""
            res = self.cardex.discover_tools("where is my package", top_k=2, format=f, call_id=call_id)
            defs = Cardex.definitions(res)
            names = [t["providerName"] for t in res["tools"]]
            self.assertEqual([d["name"] for d in defs], names, f)
            answer = Cardex.provider_answer(res)
            if f == "anthropic_tool_reference":
                self.assertEqual(answer["tool_use_id"], "toolu_9")
                self.assertEqual([b["tool_name"] for b in answer["content"]], names)
            elif f == "openai_tool_search":
                self.assertEqual(answer["type"], "tool_search_output")
                self.assertEqual([t["name"] for t in answer["tools"]], names)
            else:
                self.assertEqual(answer, defs)

    def test_retrieve_tools(self):
        names = self.cardex.retrieve_tools("", intents=["find the customer's ticket", "refund the invoice"], limit=4)
        self.assertTrue(names)
        self.assertTrue(all("__" in n for n in names), names)
        defs = self.cardex.retrieve_definitions("where is my package", limit=2, format="anthropic_tools")
        self.assertTrue(all("input_schema" in d for d in defs.values()))
        # The name the model calls a tool by is all AuthorizeCall needs.
        first = self.cardex.retrieve_tools("track a shipment", limit=1)[0]
        ok = self.cardex.authorize_call(first, {"order_id": "A-1001"})
        self.assertEqual(ok["decision"], "DECISION_ALLOW", ok)
        self.assertEqual(self.cardex.describe_tool(first)["card"]["name"], ok["tool"]["name"])

    def test_errors(self):
        with self.assertRaises(CardexError) as cm:
            Cardex(self.url).discover_tools("x")
        self.assertEqual((cm.exception.code, cm.exception.status), ("unauthenticated", 401))
        with self.assertRaises(CardexError) as cm:
            self.cardex.discover_tools("x", top_k=1000)
        self.assertEqual((cm.exception.code, cm.exception.status), ("invalid_argument", 400))
        self.assertIn("top_k", cm.exception.message)
        with self.assertRaises(CardexError) as cm:
            self.cardex.describe_tool("no_such_tool")
        self.assertEqual(cm.exception.code, "not_found")

    def test_outcome_catalog_execution_health(self):
        res = self.cardex.discover_tools("where is my package", top_k=2)
        out = self.cardex.report_outcome(res["discoveryId"], used_tool=res["tools"][0]["providerName"])
        self.assertFalse(out.get("miss", False))
        admin = Cardex(self.url, env("CARDEX_ADMIN_TOKEN"))
        cards = admin.catalog("ListCards", {"tenant": "acme", "server": "orders"})["cards"]
        self.assertIn("track_shipment", [c["name"] for c in cards])
        agent = Cardex(self.url, env("CARDEX_AGENT_TOKEN"))
        found = agent.execution("SearchTools", {"query": "where is my package", "limit": 3})["tools"]
        self.assertIn("track_shipment", [t["name"] for t in found])
        self.assertEqual(self.cardex.health(), "SERVING")


if __name__ == "__main__":
    unittest.main()
