"""svc_sdk.Client against the real sidecar, a sidecar that is down and one
that never answers."""

import os
import tempfile
import threading
import time
import unittest
from unittest import mock

from cryptography.hazmat.primitives.asymmetric import rsa

import harness
from svc_sdk import Client, Decision, SidecarRequestError, SidecarUnavailableError, TokenDecision
from svc_sdk._web import Admission


TOML_URL_CLOSED = """# the application's svc.toml
[sdk]
sidecar_addr = "https://sidecar.internal:7700"  # the local HTTP API
fail_mode = 'closed'
tenant_id = "acme"

[sdk.saml]
sidecar_addr = "http://not-this-one:1"
fail_mode = "open"
"""

CONFIG_DIR = tempfile.mkdtemp(prefix="svc-sdk-config-")


def _config(name: str, text: str) -> str:
    path = os.path.join(CONFIG_DIR, name)
    with open(path, "w") as f:
        f.write(text)
    return path


FILE_URL_CLOSED = _config("url-closed.toml", TOML_URL_CLOSED)
# The sidecar's own svc.toml: sidecar_addr is its gRPC listen address.
FILE_GRPC_OPEN = _config("grpc-open.toml", '[sdk]\nsidecar_addr = "[::1]:50051"\nfail_mode = "open"\n')
FILE_OTHER = _config("other.toml", '[sidecar]\nhttp_addr = "127.0.0.1:7700"\n')
FILE_BAD_MODE = _config("bad-mode.toml", '[sdk]\nfail_mode = "sometimes"\n')
FILE_NOT_TOML = _config("not-toml.toml", '[sdk\nfail_mode = closed\n')
FILE_NOT_STRING = _config("not-string.toml", '[sdk]\nsidecar_addr = 7700\n')
FILE_BOM = _config("bom.toml", '\ufeff[sdk]\nfail_mode = "closed"\n')
FILE_NOT_UTF8 = os.path.join(CONFIG_DIR, "latin1.toml")
with open(FILE_NOT_UTF8, "wb") as _f:
    _f.write(b'[sdk]\nfail_mode = "clos\xe9d"\n')


def tearDownModule():
    import shutil
    shutil.rmtree(CONFIG_DIR, ignore_errors=True)


class ConfigTest(unittest.TestCase):
    def test_defaults_and_environment(self):
        cases = [
            ("no environment", {}, {}, "http://localhost:7700", "open"),
            ("environment", {"SVC_SIDECAR_URL": "http://127.0.0.1:9", "SVC_FAIL_MODE": "closed"}, {},
             "http://127.0.0.1:9", "closed"),
            ("arguments win", {"SVC_SIDECAR_URL": "http://127.0.0.1:9", "SVC_FAIL_MODE": "closed"},
             {"sidecar_url": "http://[::1]:7700", "fail_mode": "open"}, "http://[::1]:7700", "open"),
            ("SVC_SIDECAR_ADDR as a URL", {"SVC_SIDECAR_ADDR": "http://127.0.0.1:8"}, {}, "http://127.0.0.1:8", "open"),
            ("SVC_SIDECAR_ADDR as host:port is the gRPC address, not ours", {"SVC_SIDECAR_ADDR": "[::1]:50051"}, {},
             "http://localhost:7700", "open"),
            ("SVC_SIDECAR_URL before SVC_SIDECAR_ADDR",
             {"SVC_SIDECAR_URL": "http://127.0.0.1:9", "SVC_SIDECAR_ADDR": "https://sidecar.internal:7700"}, {},
             "http://127.0.0.1:9", "open"),
            ("svc.toml", {}, {"config_file": FILE_URL_CLOSED}, "https://sidecar.internal:7700", "closed"),
            ("svc.toml with a gRPC address", {}, {"config_file": FILE_GRPC_OPEN}, "http://localhost:7700", "open"),
            ("environment before svc.toml", {"SVC_SIDECAR_ADDR": "http://127.0.0.1:8", "SVC_FAIL_MODE": "open"},
             {"config_file": FILE_URL_CLOSED}, "http://127.0.0.1:8", "open"),
            ("svc.toml fills what the environment leaves", {"SVC_SIDECAR_URL": "http://127.0.0.1:9"},
             {"config_file": FILE_URL_CLOSED}, "http://127.0.0.1:9", "closed"),
            ("no file", {}, {"config_file": None}, "http://localhost:7700", "open"),
            ("a missing file", {}, {"config_file": "/nonexistent/svc.toml"}, "http://localhost:7700", "open"),
            ("svc.toml without [sdk]", {}, {"config_file": FILE_OTHER}, "http://localhost:7700", "open"),
            ("svc.toml with a byte order mark", {}, {"config_file": FILE_BOM}, "http://localhost:7700", "closed"),
        ]
        for name, env, kwargs, url, mode in cases:
            with self.subTest(name):
                c = Client(env=env, **kwargs)
                self.assertEqual(c.sidecar_url, url)
                self.assertEqual(c.fail_mode, mode)
                self.assertEqual(c.timeout, 1.0)

    def test_svc_toml_in_the_working_directory(self):
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        with open(os.path.join(d, "svc.toml"), "w") as f:
            f.write(TOML_URL_CLOSED)
        self.addCleanup(os.remove, os.path.join(d, "svc.toml"))
        cwd = os.getcwd()
        os.chdir(d)
        try:
            c = Client(env={})
        finally:
            os.chdir(cwd)
        self.assertEqual((c.sidecar_url, c.fail_mode), ("https://sidecar.internal:7700", "closed"))

    def test_the_shipped_svc_example_toml(self):
        # Its sidecar_addr is the sidecar's gRPC listen address: the URL
        # stays the default; its fail_mode applies.
        c = Client(env={}, config_file=str(harness.REPO / "svc.example.toml"))
        self.assertEqual((c.sidecar_url, c.fail_mode), ("http://localhost:7700", "closed"))

    def test_process_environment(self):
        with mock.patch.dict(os.environ, {"SVC_SIDECAR_URL": "http://127.0.0.1:7799", "SVC_FAIL_MODE": "closed"}):
            c = Client()
        self.assertEqual((c.sidecar_url, c.fail_mode), ("http://127.0.0.1:7799", "closed"))

    def test_bad_configuration_is_refused(self):
        cases = [
            ("unknown fail mode", {}, {"fail_mode": "sometimes"}, "(fail_mode)"),
            ("unknown SVC_FAIL_MODE", {"SVC_FAIL_MODE": "sometimes"}, {}, "(SVC_FAIL_MODE)"),
            ("not a URL", {}, {"sidecar_url": "localhost:7700"}, "(sidecar_url)"),
            ("grpc address", {}, {"sidecar_url": "[::1]:50051"}, "(sidecar_url)"),
            ("SVC_SIDECAR_URL not a URL", {"SVC_SIDECAR_URL": "[::1]:50051"}, {}, "(SVC_SIDECAR_URL)"),
            ("SVC_SIDECAR_ADDR URL without a host", {"SVC_SIDECAR_ADDR": "http://"}, {}, "(SVC_SIDECAR_ADDR)"),
            ("bad port", {}, {"sidecar_url": "http://localhost:99999"}, "invalid port (sidecar_url)"),
            ("zero timeout", {}, {"timeout": 0}, "timeout"),
            ("unknown fail mode in svc.toml", {}, {"config_file": FILE_BAD_MODE}, "sdk.fail_mode of " + FILE_BAD_MODE),
            ("svc.toml not TOML", {}, {"config_file": FILE_NOT_TOML}, FILE_NOT_TOML + ": not valid TOML"),
            ("svc.toml sidecar_addr not a string", {}, {"config_file": FILE_NOT_STRING},
             "sdk.sidecar_addr must be a string"),
            ("svc.toml a directory", {}, {"config_file": CONFIG_DIR}, CONFIG_DIR),
            ("svc.toml not UTF-8", {}, {"config_file": FILE_NOT_UTF8}, "not UTF-8"),
        ]
        for name, env, kwargs, mention in cases:
            with self.subTest(name):
                with self.assertRaises(ValueError) as cm:
                    Client(env=env, **kwargs)
                self.assertIn(mention, str(cm.exception))


class SidecarTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.idp, cls.sidecar = harness.shared()
        cls.client = Client(cls.sidecar.url, "closed", harness.CALL_TIMEOUT)

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
                self.assertRegex(d.decision_id, r"^[0-9a-f-]{36}$", "every answer has its decision id")
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
                c = Client(self.sidecar.url, mode, harness.CALL_TIMEOUT)
                with self.assertRaises(SidecarRequestError) as cm:
                    c.authorize(self.idp.token(harness.claims()), "")
                self.assertEqual(cm.exception.reason, "input-invalid")

    def test_connections_are_kept_alive_and_reused(self):
        relay = harness.Relay(self.sidecar.http_addr)
        self.addCleanup(relay.close)
        c = Client(relay.url, "closed", harness.CALL_TIMEOUT)
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
        # Four calls, each bounded by the timeout (a hung call would never
        # return); the margin is for a loaded machine.
        self.assertLess(time.monotonic() - start, 4 * 0.3 + 20)

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

    def test_an_answer_that_is_not_a_decision_allows_nothing(self):
        # Something else answering 200 at the sidecar's URL (a wrong port,
        # a proxy's page): only a JSON true is an allowed decision, as
        # protojson writes it and the Go and TypeScript clients read it.
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from svc_sdk._web import check_action, check_token

        bodies = [b'{"allowed":"false"}', b'{"allowed":"true"}', b'{"allowed":1}', b'{"allowed":[false]}',
                  b'{"allowed":{"value":false}}', b'{"status":"ok"}']
        answer = [b""]

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer[0])))
                self.end_headers()
                self.wfile.write(answer[0])

            def log_message(self, *args):
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        for mode in ("open", "closed"):
            client = Client(url, mode, harness.CALL_TIMEOUT)
            for body in bodies:
                answer[0] = body
                with self.subTest(f"{body.decode()}, {mode}"):
                    self.assertFalse(client.validate_token("tok").allowed)
                    self.assertFalse(client.authorize("tok", "orders:read").allow)
                    self.assertNotIsInstance(check_token(client, "Bearer tok"), Admission)
                    self.assertNotIsInstance(check_action(client, "Bearer tok", "orders:read"), Admission)

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
                    Client(sc.url, mode, harness.CALL_TIMEOUT).authorize(tok, "orders:read")
                self.assertEqual(cm.exception.reason, "policy-error")
                from svc_sdk._web import check_action
                r = check_action(Client(sc.url, mode, harness.CALL_TIMEOUT), f"Bearer {tok}", "orders:read")
                self.assertEqual((r.status, r.reason), (503, "policy-error"))


OWNER_POLICY = """package svc.authz

default allow := false

allow if input.resource.attributes.owner == input.user.id

deny_reasons := set() if allow
else := {"not-owner"}
"""


class ResourceAttributesTest(unittest.TestCase):
    def test_policy_reads_resource_attributes(self):
        idp, _ = harness.shared()
        d = tempfile.mkdtemp(prefix="policy-", dir=harness._tmp)
        with open(os.path.join(d, "authz.rego"), "w") as f:
            f.write(OWNER_POLICY)
        sc = harness.Sidecar(idp, {"SVC_POLICY_DIR": d})
        self.addCleanup(sc.stop)
        c = Client(sc.url, "closed", harness.CALL_TIMEOUT)
        self.addCleanup(c.close)
        tok = idp.token(harness.claims(sub="alice"))
        attrs = {"owner": "alice", "status": "open", "tags": ["a", 1], "meta": {"region": "eu"}}
        owner = c.authorize(tok, "orders:update", resource_id="o-1", resource_attributes=attrs)
        self.assertEqual((owner.allow, owner.reason), (True, "policy-allow"))
        other = c.authorize(tok, "orders:update", resource_id="o-1", resource_attributes={**attrs, "owner": "bob"})
        self.assertEqual((other.allow, other.deny_reasons), (False, ["not-owner"]))
        none = c.authorize(tok, "orders:update", resource_id="o-1")
        self.assertFalse(none.allow)
        with self.assertRaises(SidecarRequestError) as cm:
            c.authorize(tok, "orders:update", resource_attributes={"k" * 129: 1})
        self.assertEqual(cm.exception.reason, "input-invalid")


class RateLimitTest(unittest.TestCase):
    def test_rate_limited_decision_and_answer(self):
        from svc_sdk._web import check_action

        idp, _ = harness.shared()
        sc = harness.Sidecar(idp, {"SVC_RATE_LIMIT_DEFAULT_RPM": "1"})
        self.addCleanup(sc.stop)
        c = Client(sc.url, "closed", harness.CALL_TIMEOUT)
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
