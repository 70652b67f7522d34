"""svc_sdk.Client against the real sidecar, a sidecar that is down and one
that never answers."""

import os
import tempfile
import time
import unittest

from cryptography.hazmat.primitives.asymmetric import rsa

import harness
from svc_sdk import Client, Decision, SidecarRequestError, SidecarUnavailableError, TokenDecision


class ConfigTest(unittest.TestCase):
    def test_defaults_and_environment(self):
        cases = [
            ("no environment", {}, {}, "http://localhost:7700", "open"),
            ("environment", {"SVC_SIDECAR_URL": "http://127.0.0.1:9", "SVC_FAIL_MODE": "closed"}, {},
             "http://127.0.0.1:9", "closed"),
            ("arguments win", {"SVC_SIDECAR_URL": "http://127.0.0.1:9", "SVC_FAIL_MODE": "closed"},
             {"sidecar_url": "http://[::1]:7700", "fail_mode": "open"}, "http://[::1]:7700", "open"),
        ]
        for name, env, kwargs, url, mode in cases:
            with self.subTest(name):
                c = Client(env=env, **kwargs)
                self.assertEqual(c.sidecar_url, url)
                self.assertEqual(c.fail_mode, mode)
                self.assertEqual(c.timeout, 1.0)

    def test_process_environment(self):
        old = {k: os.environ.get(k) for k in ("SVC_SIDECAR_URL", "SVC_FAIL_MODE")}
        os.environ.update({"SVC_SIDECAR_URL": "http://127.0.0.1:7799", "SVC_FAIL_MODE": "closed"})
        try:
            c = Client()
            self.assertEqual((c.sidecar_url, c.fail_mode), ("http://127.0.0.1:7799", "closed"))
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_bad_configuration_is_refused(self):
        cases = [
            ("unknown fail mode", {"fail_mode": "sometimes"}, "SVC_FAIL_MODE"),
            ("not a URL", {"sidecar_url": "localhost:7700"}, "SVC_SIDECAR_URL"),
            ("grpc address", {"sidecar_url": "[::1]:50051"}, "SVC_SIDECAR_URL"),
            ("bad port", {"sidecar_url": "http://localhost:99999"}, "SVC_SIDECAR_URL"),
            ("zero timeout", {"timeout": 0}, "timeout"),
        ]
        for name, kwargs, mention in cases:
            with self.subTest(name):
                with self.assertRaises(ValueError) as cm:
                    Client(env={}, **kwargs)
                self.assertIn(mention, str(cm.exception))


class SidecarTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.idp, cls.sidecar = harness.shared()
        cls.client = Client(cls.sidecar.url, "closed")

    def test_validate_token(self):
        other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        now = int(time.time())
        cases = [
            ("valid", self.idp.token(harness.claims(email="a@example.com", dept="eng")), True, "ok"),
            ("expired", self.idp.token(harness.claims(iat=now - 600, exp=now - 300)), False, "token-expired"),
            ("wrong signature", self.idp.token(harness.claims(), key=other_key), False, "signature-invalid"),
            ("no tenant", self.idp.token({k: v for k, v in harness.claims().items() if k != "tenant_id"}),
             False, "tenant-missing"),
            ("garbage", "not-a-jwt", False, "token-malformed"),
            ("empty", "", False, "token-missing"),
        ]
        for name, tok, allowed, reason in cases:
            with self.subTest(name):
                d = self.client.validate_token(tok)
                self.assertIsInstance(d, TokenDecision)
                self.assertEqual((d.allowed, d.reason), (allowed, reason))
                if allowed:
                    self.assertEqual(d.claims["sub"], "alice")
                    self.assertEqual(d.claims["tenant_id"], harness.TENANT)
                    self.assertEqual(d.claims["dept"], "eng")  # custom claims carried through
                    self.assertEqual(d.subject, "alice")
                else:
                    self.assertIsNone(d.claims)

    def test_authorize(self):
        viewer = self.idp.token(harness.claims(roles=["viewer"]))
        cases = [
            ("allowed", viewer, "orders:read", {}, True, "policy-allow", []),
            ("role forbids", viewer, "orders:delete", {"resource_id": "42"}, False, "policy-deny",
             ["role-forbidden: viewer cannot orders:delete"]),
            ("other tenant's resource", viewer, "orders:read", {"resource_tenant": "globex"}, False,
             "policy-deny", ["tenant-mismatch"]),
            ("expired token", self.idp.token(harness.claims(exp=int(time.time()) - 300)), "orders:read", {},
             False, "token-expired", []),
        ]
        for name, tok, action, kwargs, allow, reason, deny in cases:
            with self.subTest(name):
                d = self.client.authorize(tok, action, **kwargs)
                self.assertIsInstance(d, Decision)
                self.assertEqual((d.allow, d.reason, d.deny_reasons), (allow, reason, deny))
                if reason.startswith("policy-"):
                    self.assertTrue(d.decision_id)
                    self.assertEqual(d.claims["sub"], "alice")

    def test_malformed_request_is_an_error_not_a_decision(self):
        for mode in ("open", "closed"):
            with self.subTest(mode):
                c = Client(self.sidecar.url, mode)
                with self.assertRaises(SidecarRequestError) as cm:
                    c.authorize(self.idp.token(harness.claims()), "")
                self.assertEqual(cm.exception.reason, "input-invalid")

    def test_connections_are_kept_alive_and_reused(self):
        relay = harness.Relay(self.sidecar.http_addr)
        self.addCleanup(relay.close)
        c = Client(relay.url, "closed")
        tok = self.idp.token(harness.claims())
        for _ in range(20):
            self.assertTrue(c.validate_token(tok).allowed)
        self.assertEqual(relay.accepted, 1)
        # The server closed the idle connection: the next call reconnects.
        relay.drop_all()
        self.assertTrue(c.validate_token(tok).allowed)
        self.assertEqual(relay.accepted, 2)

    def test_concurrent_calls(self):
        from concurrent.futures import ThreadPoolExecutor
        toks = [self.idp.token(harness.claims(sub=f"user-{i}")) for i in range(16)]
        with ThreadPoolExecutor(8) as ex:
            subs = list(ex.map(lambda t: self.client.validate_token(t).claims["sub"], toks * 4))
        self.assertEqual(subs, [f"user-{i}" for i in range(16)] * 4)


class UnavailableTest(unittest.TestCase):
    """The fail-mode table: open allows with no claims, closed raises."""

    def test_sidecar_down(self):
        self._check(harness.down_url(), timeout=None)

    def test_sidecar_times_out(self):
        hole = harness.BlackHole()
        self.addCleanup(hole.close)
        start = time.monotonic()
        self._check(hole.url, timeout=0.3)
        # Four calls, each bounded by the timeout.
        self.assertLess(time.monotonic() - start, 4 * 0.3 + 2)

    def _check(self, url, timeout):
        opened = Client(url, "open", timeout)
        with self.assertLogs("svc_sdk", "WARNING") as logs:
            d = opened.validate_token("any")
        self.assertIn("fail_mode=open", logs.output[0])
        self.assertEqual(d, TokenDecision(True, None, "fail-open", subject="anonymous",
                                          message="sidecar unavailable; allowed by fail_mode=open"))
        a = opened.authorize("any", "orders:read")
        self.assertEqual((a.allow, a.claims, a.reason, a.deny_reasons), (True, None, "fail-open", []))

        closed = Client(url, "closed", timeout)
        with self.assertRaises(SidecarUnavailableError) as cm:
            closed.validate_token("any")
        self.assertEqual(cm.exception.reason, "unavailable")
        self.assertIn(url, str(cm.exception))
        with self.assertRaises(SidecarUnavailableError):
            closed.authorize("any", "orders:read")

    def test_sidecar_cannot_decide(self):
        # A policy whose evaluation fails at run time: the sidecar answers
        # 500 policy-error, a refusal in both fail modes (fail open is for
        # a sidecar that cannot be reached).
        idp, _ = harness.shared()
        d = tempfile.mkdtemp(prefix="policy-", dir=harness._tmp)
        with open(os.path.join(d, "authz.rego"), "w") as f:
            f.write("package svc.authz\n\nallow := true if input.action\n\nallow := false if input.action\n\n"
                    "deny_reasons := set()\n")
        sc = harness.Sidecar(idp, {"SVC_POLICY_DIR": d})
        self.addCleanup(sc.stop)
        tok = idp.token(harness.claims())
        for mode in ("open", "closed"):
            with self.subTest(mode):
                with self.assertRaises(SidecarUnavailableError) as cm:
                    Client(sc.url, mode).authorize(tok, "orders:read")
                self.assertEqual(cm.exception.reason, "policy-error")
                from svc_sdk._web import check_action
                r = check_action(Client(sc.url, mode), f"Bearer {tok}", "orders:read")
                self.assertEqual((r.status, r.reason), (503, "policy-error"))


class RateLimitTest(unittest.TestCase):
    def test_rate_limited_decision_and_answer(self):
        from svc_sdk._web import check_action

        idp, _ = harness.shared()
        sc = harness.Sidecar(idp, {"SVC_RATE_LIMIT_DEFAULT_RPM": "1"})
        self.addCleanup(sc.stop)
        c = Client(sc.url, "closed")
        self.addCleanup(c.close)
        tok = idp.token(harness.claims())
        self.assertTrue(c.authorize(tok, "orders:read").allow)
        d = c.authorize(tok, "orders:read")
        self.assertEqual((d.allow, d.reason), (False, "rate-limited"))
        self.assertIsNotNone(d.retry_after)
        self.assertGreater(d.retry_after, 0)
        r = check_action(c, f"Bearer {tok}", "orders:read")
        self.assertEqual(r.status, 429)
        self.assertGreaterEqual(int(r.headers["Retry-After"]), 1)
