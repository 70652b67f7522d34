"""The behaviour every framework's middleware must show, as a mixin.

A framework's test case builds an app with these routes:

    GET /whoami             validated only; answers {"claims": <the request attribute>}
    GET /orders/{order_id}  require_action("orders:read"); answers {"claims": ..., "decision_id": ...}
    GET /orders/{order_id}/delete  require_action("orders:delete")
    GET /healthz            excluded; answers {"claims": <the request attribute>}

and implements ``call(client, path, token, headers=None) -> (status,
headers, json)``: ``token`` is sent as a bearer token, ``headers`` as
they are; the answer's ``headers`` with lower-case names.
"""

from __future__ import annotations

import time

import harness
from svc_sdk import Client


class MiddlewareBehaviour:
    def call(self, client: Client, path: str, token: str | None,
             headers: dict[str, str] | None = None):  # pragma: no cover
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.idp, cls.sidecar = harness.shared()
        cls.client = Client(cls.sidecar.url, "closed", harness.CALL_TIMEOUT)

    def token(self, **over):
        return self.idp.token(harness.claims(**over))

    def body(self, j):
        """The refusal body, checked to have exactly the fields every svc
        middleware (Python, TypeScript, Go) answers with."""
        self.assertIsInstance(j, dict)
        self.assertLessEqual({"allow", "deny_reasons", "reason"}, set(j), j)
        self.assertLessEqual(set(j), {"allow", "deny_reasons", "reason", "decision_id"}, j)
        self.assertIs(j["allow"], False, j)
        self.assertIsInstance(j["deny_reasons"], list, j)
        return j

    def test_valid_token_claims_on_the_request(self):
        status, _, j = self.call(self.client, "/whoami", self.token(email="alice@example.com"))
        self.assertEqual(status, 200, j)
        self.assertEqual(j["claims"]["sub"], "alice")
        self.assertEqual(j["claims"]["tenant_id"], harness.TENANT)
        self.assertEqual(j["claims"]["email"], "alice@example.com")

    def test_refusals(self):
        now = int(time.time())
        cases = [
            ("no token", "/whoami", None, 401, "token-missing", "Bearer"),
            ("expired", "/whoami", self.token(iat=now - 600, exp=now - 300), 401, "token-expired",
             'Bearer error="invalid_token", error_description="token-expired"'),
            ("malformed", "/whoami", "abc", 401, "token-malformed",
             'Bearer error="invalid_token", error_description="token-malformed"'),
            ("action without token", "/orders/1", None, 401, "token-missing", "Bearer"),
            ("action, expired", "/orders/1", self.token(exp=now - 300), 401, "token-expired",
             'Bearer error="invalid_token", error_description="token-expired"'),
        ]
        # A reachable sidecar refuses an invalid token whatever the mode.
        for mode in ("open", "closed"):
            client = Client(self.sidecar.url, mode, harness.CALL_TIMEOUT)
            for name, path, tok, status, reason, challenge in cases:
                with self.subTest(f"{name}, {mode}"):
                    got, headers, j = self.call(client, path, tok)
                    self.assertEqual(got, status, j)
                    self.assertEqual(headers.get("www-authenticate"), challenge)
                    self.assertTrue(headers.get("content-type", "").startswith("application/json"), headers)
                    self.assertEqual((headers.get("cache-control"), headers.get("x-content-type-options")),
                                     ("no-store", "nosniff"))
                    b = self.body(j)
                    self.assertEqual((b["deny_reasons"], b["reason"]), ([], reason))

    def test_require_action(self):
        for mode in ("open", "closed"):
            client = Client(self.sidecar.url, mode, harness.CALL_TIMEOUT)
            with self.subTest(mode):
                viewer = self.token(roles=["viewer"])
                status, _, j = self.call(client, "/orders/7", viewer)
                self.assertEqual(status, 200, j)
                self.assertEqual(j["claims"]["sub"], "alice")
                self.assertTrue(j["decision_id"])

                status, headers, j = self.call(client, "/orders/7/delete", viewer)
                self.assertEqual(status, 403, j)
                self.assertIsNone(headers.get("www-authenticate"))
                self.assertTrue(headers.get("content-type", "").startswith("application/json"), headers)
                b = self.body(j)
                self.assertEqual(b["reason"], "policy-deny")
                self.assertEqual(b["deny_reasons"], ["role-forbidden: viewer cannot orders:delete"])
                self.assertTrue(b["decision_id"])

                status, _, j = self.call(client, "/orders/7/delete", self.token(roles=["admin"]))
                self.assertEqual(status, 200, j)

    def test_token_of_another_tenant_is_forbidden(self):
        for path in ("/whoami", "/orders/7"):
            with self.subTest(path):
                status, headers, j = self.call(self.client, path, self.token(tenant="globex"))
                self.assertEqual(status, 403, j)
                self.assertIsNone(headers.get("www-authenticate"))
                b = self.body(j)
                self.assertIn("tenant-mismatch", [b["reason"], *b["deny_reasons"]])

    def test_api_keys(self):
        # Read as the sidecar's checks read them: "Authorization: ApiKey",
        # else X-Api-Key when there is no Authorization header at all.
        keys = harness.api_keys()
        invalid = 'ApiKey error="invalid_key", error_description="{}"'
        cases = [
            ("X-Api-Key", "/whoami", {"X-Api-Key": keys.viewer}, 200, None, None),
            ("X-Api-Key, action", "/orders/7", {"X-Api-Key": f" {keys.viewer} "}, 200, None, None),
            ("ApiKey scheme", "/whoami", {"Authorization": f"apikey {keys.viewer}"}, 200, None, None),
            ("ApiKey scheme, action", "/orders/7", {"Authorization": f"ApiKey\t{keys.viewer}"}, 200, None, None),
            ("ApiKey scheme beside another X-Api-Key", "/whoami",
             {"Authorization": f"ApiKey {keys.viewer}", "X-Api-Key": keys.revoked}, 200, None, None),
            ("viewer key deletes", "/orders/7/delete", {"X-Api-Key": keys.viewer}, 403, "policy-deny", None),
            ("revoked", "/whoami", {"X-Api-Key": keys.revoked}, 401, "api-key-revoked",
             invalid.format("api-key-revoked")),
            ("revoked, action", "/orders/7", {"Authorization": f"ApiKey {keys.revoked}"}, 401, "api-key-revoked",
             invalid.format("api-key-revoked")),
            ("unknown", "/whoami", {"Authorization": f"ApiKey {keys.unknown}"}, 401, "api-key-unknown",
             invalid.format("api-key-unknown")),
            ("unknown, action", "/orders/7", {"X-Api-Key": keys.unknown}, 401, "api-key-unknown",
             invalid.format("api-key-unknown")),
            ("expired", "/whoami", {"X-Api-Key": keys.expired}, 401, "api-key-expired",
             invalid.format("api-key-expired")),
            ("malformed", "/orders/7", {"X-Api-Key": "svck_short"}, 401, "api-key-malformed",
             invalid.format("api-key-malformed")),
            # A bearer scheme decides: X-Api-Key beside it is not read.
            ("bearer beside X-Api-Key", "/whoami", {"Authorization": "Bearer junk", "X-Api-Key": keys.viewer},
             401, "token-malformed", 'Bearer error="invalid_token", error_description="token-malformed"'),
            ("another scheme beside X-Api-Key", "/orders/7", {"Authorization": "Basic YTpi", "X-Api-Key": keys.viewer},
             401, "token-missing", "Bearer"),
            ("empty X-Api-Key", "/whoami", {"X-Api-Key": " "}, 401, "token-missing", "Bearer"),
        ]
        for mode in ("open", "closed"):
            client = Client(keys.sidecar.url, mode, harness.CALL_TIMEOUT)
            for name, path, headers, status, reason, challenge in cases:
                with self.subTest(f"{name}, {mode}"):
                    got, h, j = self.call(client, path, None, headers)
                    self.assertEqual(got, status, j)
                    self.assertEqual(h.get("www-authenticate"), challenge)
                    if status == 200:
                        self.assertEqual(j["claims"]["sub"], harness.APIKeys.SUBJECT, j)
                        self.assertEqual(j["claims"]["tenant_id"], harness.TENANT, j)
                        self.assertEqual(j["claims"]["api_key_id"], harness.key_id(keys.viewer), j)
                    else:
                        self.assertEqual(self.body(j)["reason"], reason)
        # The sidecar takes the IdP's bearer tokens beside keys: a token
        # decides over an X-Api-Key beside it.
        client = Client(keys.sidecar.url, "closed", harness.CALL_TIMEOUT)
        got, _, j = self.call(client, "/whoami", self.token(), {"X-Api-Key": keys.revoked})
        self.assertEqual((got, j["claims"]["sub"]), (200, "alice"), j)

    def test_excluded_path(self):
        status, _, j = self.call(self.client, "/healthz", None)
        self.assertEqual((status, j), (200, {"claims": None}))

    def test_fail_modes(self):
        hole = harness.BlackHole()
        self.addCleanup(hole.close)
        targets = [("down", harness.down_url(), None), ("timing out", hole.url, 0.3)]
        tok = self.token()
        for name, url, timeout in targets:
            for path in ("/whoami", "/orders/1"):
                with self.subTest(f"{name}, open, {path}"):
                    status, _, j = self.call(Client(url, "open", timeout), path, tok)
                    self.assertEqual(status, 200, j)
                    self.assertIsNone(j["claims"])
                with self.subTest(f"{name}, closed, {path}"):
                    status, _, j = self.call(Client(url, "closed", timeout), path, tok)
                    self.assertEqual(status, 503, j)
                    self.assertEqual(self.body(j)["reason"], "unavailable")
                with self.subTest(f"{name}, open, a request without a token is still refused, {path}"):
                    status, _, j = self.call(Client(url, "open", timeout), path, None)
                    self.assertEqual(status, 401, j)

    def test_fail_modes_when_the_running_sidecar_stops(self):
        # A real sidecar that answered, then went down: the clients hold
        # pooled connections to it when it stops.
        sidecar = harness.Sidecar(self.idp)
        self.addCleanup(sidecar.stop)
        clients = {mode: Client(sidecar.url, mode, harness.CALL_TIMEOUT) for mode in ("open", "closed")}
        tok = self.token()
        paths = ("/whoami", "/orders/1")
        for mode, client in clients.items():
            for path in paths:
                with self.subTest(f"up, {mode}, {path}"):
                    status, _, j = self.call(client, path, tok)
                    self.assertEqual(status, 200, j)
                    self.assertEqual(j["claims"]["sub"], "alice")
        sidecar.stop()
        for path in paths:
            with self.subTest(f"stopped, open, {path}"):
                status, _, j = self.call(clients["open"], path, tok)
                self.assertEqual(status, 200, j)
                self.assertIsNone(j["claims"])
            with self.subTest(f"stopped, closed, {path}"):
                status, headers, j = self.call(clients["closed"], path, tok)
                self.assertEqual(status, 503, j)
                self.assertEqual(self.body(j)["reason"], "unavailable")
                self.assertIsNone(headers.get("www-authenticate"))
