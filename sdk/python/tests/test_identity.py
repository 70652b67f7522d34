"""svc_sdk.identity against the real sidecar: the X-Svc-Identity token of
an allowed check verifies against the sidecar's /.well-known/jwks.json,
and the Flask, FastAPI and Django middleware admit a request on it alone.

The sidecars sign with EC P-256 keys made by ``openssl genpkey``.
"""

from __future__ import annotations

import atexit
import base64
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

import harness
import test_django  # noqa: F401  (configures Django's settings for the whole run)
from svc_sdk import TokenDecision
from svc_sdk._web import once
from svc_sdk.identity import IDENTITY_HEADER, IdentityError, IdentityVerifier, check_identity

AUDIENCE = "orders.internal"


def b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def parts(tok: str) -> tuple[dict, dict]:
    h, p, _ = tok.split(".")
    return json.loads(unb64(h)), json.loads(unb64(p))


def new_key(path: str) -> None:
    """An EC P-256 private key in PEM, as the docs make one."""
    if shutil.which("openssl") is None:
        harness.missing("openssl", "apt-get install openssl")
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path],
                   check=True, capture_output=True, timeout=60)
    os.chmod(path, 0o600)


def identity_of(sc: harness.Sidecar, bearer: str, host: str = AUDIENCE) -> str:
    """The X-Svc-Identity of an allowed nginx-style check of ``bearer``
    for ``host``."""
    addr = urllib.parse.urlsplit(sc.url)
    conn = http.client.HTTPConnection(addr.hostname, addr.port, timeout=harness.CALL_TIMEOUT)
    try:
        conn.request("GET", "/check", headers={
            "Authorization": f"Bearer {bearer}", "X-Original-URI": "/orders/1", "X_Svc_Method": "GET",
            "X-Forwarded-Host": host})
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200, (resp.status, body)
        tok = resp.getheader("X-Svc-Identity")
        assert tok, resp.getheaders()
        return tok
    finally:
        conn.close()


def resign(tok: str, key_file: str, **claims: object) -> str:
    """``tok`` with ``claims`` changed, signed again by the key of
    ``key_file`` under the same kid: a token the sidecar could have made."""
    header, payload = parts(tok)
    payload.update(claims)
    with open(key_file, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    signing = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    r, s = decode_dss_signature(key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signing}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


class Env:
    """An IdP, the sidecar signing identity tokens (``sc``), one with the
    same key and a lifetime of 1 s (``short``), and one with another key
    (``other``)."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="svc-identity-")
        self.key = os.path.join(self.dir, "key.pem")
        new_key(self.key)
        other_key = os.path.join(self.dir, "other.pem")
        new_key(other_key)
        self.idp, _ = harness.shared()
        self.sc = harness.Sidecar(self.idp, {"SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE": self.key})
        self.short = harness.Sidecar(self.idp, {"SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE": self.key,
                                                "SVC_IDENTITY_TOKEN_TTL": "1s"})
        self.other = harness.Sidecar(self.idp, {"SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE": other_key})
        self.jwks_url = f"{self.sc.url}/.well-known/jwks.json"

    def token(self, sc: harness.Sidecar | None = None, host: str = AUDIENCE, **over: object) -> str:
        return identity_of(sc or self.sc, self.idp.token(harness.claims(**over)), host)

    def close(self) -> None:
        for sc in (self.sc, self.short, self.other):
            sc.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@once
def env() -> Env:
    """The sidecars of these tests, started on first use, stopped at exit."""
    e = Env()
    atexit.register(e.close)
    return e


class VerifierTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.env = env()

    def verifier(self, url: str | None = None, **kw: object) -> IdentityVerifier:
        v = IdentityVerifier(url or self.env.jwks_url, **{"audience": AUDIENCE, "issuer": "svc-sidecar", **kw})
        self.addCleanup(v.close)
        return v

    def refused(self, v: IdentityVerifier, tok: str | None) -> str:
        with self.assertRaises(IdentityError) as cm:
            v.verify(tok)
        return cm.exception.reason

    def test_the_sidecars_token_names_the_caller(self) -> None:
        tok = self.env.token()
        c = self.verifier().verify(tok)
        self.assertEqual((c["sub"], c["tenant_id"], c["roles"], c["aud"], c["iss"], c["kind"]),
                         ("alice", harness.TENANT, ["viewer"], AUDIENCE, "svc-sidecar", "jwt"))
        self.assertTrue(c["decision_id"])
        self.assertTrue(c["jti"])
        self.assertLessEqual(c["iat"], time.time() + 1)
        header, _ = parts(tok)
        self.assertEqual(header["alg"], "ES256")

    def test_refusals(self) -> None:
        v = self.verifier()
        good = self.env.token()
        h, p, s = good.split(".")
        _, payload = parts(good)
        forged_payload = b64(json.dumps({**payload, "sub": "root", "roles": ["admin"]}).encode())
        sig = bytearray(unb64(s))
        sig[10] ^= 1
        alg_none = b64(json.dumps({"alg": "none", "kid": parts(good)[0]["kid"]}).encode())
        cases = [
            ("missing", None, "token-missing"),
            ("empty", "", "token-missing"),
            ("not a JWT", "garbage", "token-malformed"),
            ("not base64url JSON", "a.b.c", "token-malformed"),
            ("claims changed", f"{h}.{forged_payload}.{s}", "signature-invalid"),
            ("signature changed", f"{h}.{p}.{b64(bytes(sig))}", "signature-invalid"),
            ("signature cut", f"{h}.{p}.{s[:-4]}", "signature-invalid"),
            ("alg none", f"{alg_none}.{p}.", "signature-invalid"),
            ("alg none, signed", f"{alg_none}.{p}.{s}", "signature-invalid"),
            ("another sidecar's key", self.env.token(self.env.other), "signature-invalid"),
            ("for another service", self.env.token(host="billing.internal"), "audience-mismatch"),
            ("expired", resign(good, self.env.key, iat=int(time.time()) - 600, nbf=int(time.time()) - 600,
                               exp=int(time.time()) - 60), "token-expired"),
            ("not yet valid", resign(good, self.env.key, nbf=int(time.time()) + 60), "token-not-yet-valid"),
            ("no exp", resign(good, self.env.key, exp=None), "token-expired"),
            ("another issuer", resign(good, self.env.key, iss="someone-else"), "issuer-mismatch"),
        ]
        for name, tok, reason in cases:
            with self.subTest(name):
                self.assertEqual(self.refused(v, tok), reason)
        # The same token of another audience, and of the re-signed kind,
        # verifies where the audience is not checked: the refusal above is
        # the audience's.
        open_v = self.verifier(audience=None)
        self.assertEqual(open_v.verify(self.env.token(host="billing.internal"))["aud"], "billing.internal")
        self.assertEqual(open_v.verify(resign(good, self.env.key, sub="bob"))["sub"], "bob")

    def test_expired_token_of_a_short_lifetime(self) -> None:
        tok = self.env.token(self.env.short)
        _, c = parts(tok)
        self.assertLessEqual(c["exp"] - c["iat"], 1, c)
        strict = self.verifier(skew=0)
        lenient = self.verifier()
        self.assertEqual(strict.verify(tok)["sub"], "alice")
        time.sleep(max(0.0, c["exp"] - time.time()) + 1.1)
        self.assertEqual(self.refused(strict, tok), "token-expired")
        if time.time() < c["exp"] + 4:
            # Within the default 5 s of clock skew: still good.
            self.assertEqual(lenient.verify(tok)["sub"], "alice")

    def test_no_key_set_is_jwks_unavailable(self) -> None:
        v = self.verifier(harness.down_url() + "/.well-known/jwks.json")
        self.assertEqual(self.refused(v, "a.b.c"), "token-malformed")
        self.assertEqual(self.refused(v, self.env.token()), "jwks-unavailable")
        # A sidecar without identity_token answers 404: no keys either.
        _, plain = harness.shared()
        v = self.verifier(f"{plain.url}/.well-known/jwks.json")
        self.assertEqual(self.refused(v, self.env.token()), "jwks-unavailable")

    def test_fetched_keys_outlive_an_outage(self) -> None:
        relay = harness.Relay(self.env.sc.http_addr)
        self.addCleanup(relay.close)
        v = self.verifier(f"{relay.url}/.well-known/jwks.json", refresh=0.2)
        tok = self.env.token()
        self.assertEqual(v.verify(tok)["sub"], "alice")
        relay.close()
        time.sleep(0.3)
        # The set is stale and cannot be fetched again: the keys of a
        # moment ago still verify.
        self.assertEqual(v.verify(tok)["sub"], "alice")
        fresh = self.verifier(f"{relay.url}/.well-known/jwks.json")
        self.assertEqual(self.refused(fresh, tok), "jwks-unavailable")

    def test_a_rotated_key_is_fetched(self) -> None:
        key = os.path.join(self.env.dir, "rotating.pem")
        new_key(key)
        sc = harness.Sidecar(self.env.idp, {"SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE": key})
        self.addCleanup(sc.stop)
        v = self.verifier(f"{sc.url}/.well-known/jwks.json")
        first = self.env.token(sc)
        self.assertEqual(v.verify(first)["sub"], "alice")
        new_key(key + ".new")
        os.replace(key + ".new", key)
        # The sidecar re-reads the file every 2 s; every caller then gets
        # a token of the new key.
        deadline = time.monotonic() + 20
        while True:
            second = self.env.token(sc)
            if parts(second)[0]["kid"] != parts(first)[0]["kid"]:
                break
            self.assertLess(time.monotonic(), deadline, "the sidecar kept its key")
            time.sleep(0.2)
        # The verifier's set lacks the new kid: it fetches again, at most
        # every 5 s, and then verifies without a restart.
        deadline = time.monotonic() + 20
        while True:
            try:
                self.assertEqual(v.verify(second)["sub"], "alice")
                break
            except IdentityError as e:
                self.assertEqual(e.reason, "signature-invalid")
                self.assertLess(time.monotonic(), deadline, "the new key was never fetched")
                time.sleep(0.2)

    def test_check_identity(self) -> None:
        v = self.verifier()
        out = check_identity(v, self.env.token())
        self.assertIsInstance(out.decision, TokenDecision)
        self.assertEqual((out.decision.reason, out.decision.subject, out.decision.tenant_id, out.claims["sub"]),
                         ("ok", "alice", harness.TENANT, "alice"))
        r = check_identity(v, None)
        self.assertEqual((r.status, r.reason, r.headers), (401, "token-missing", {"WWW-Authenticate": "Bearer"}))

    def test_arguments(self) -> None:
        for bad in ("", "ftp://x/jwks.json", "http:///jwks.json"):
            with self.subTest(bad):
                with self.assertRaises(ValueError):
                    IdentityVerifier(bad)


class IdentityBehaviour:
    """What every framework's middleware must do with an identity
    verifier. A framework's test case implements ``call(verifier, path,
    identity)`` -> (status, headers with lower-case names, JSON): ``GET
    /whoami`` answers {"claims": ..., "subject": ..., "tenant_id": ...,
    "reason": ...} from the request's attributes; ``/healthz`` is
    excluded."""

    def call(self, verifier: IdentityVerifier, path: str, identity: str | None):  # pragma: no cover
        raise NotImplementedError

    @classmethod
    def setUpClass(cls) -> None:
        cls.env = env()
        cls.verifier = IdentityVerifier(cls.env.jwks_url, AUDIENCE, "svc-sidecar")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.verifier.close()

    def test_valid_token_admitted(self) -> None:
        status, _, j = self.call(self.verifier, "/whoami", self.env.token())
        self.assertEqual(status, 200, j)
        self.assertEqual((j["claims"]["sub"], j["claims"]["tenant_id"], j["claims"]["roles"]),
                         ("alice", harness.TENANT, ["viewer"]))
        self.assertEqual((j["subject"], j["tenant_id"], j["reason"]), ("alice", harness.TENANT, "ok"))
        self.assertTrue(j["claims"]["decision_id"])

    def test_refusals(self) -> None:
        good = self.env.token()
        h, p, s = good.split(".")
        _, payload = parts(good)
        tampered = f"{h}.{b64(json.dumps({**payload, 'sub': 'root'}).encode())}.{s}"
        now = int(time.time())
        invalid = 'Bearer error="invalid_token", error_description="{}"'
        down = IdentityVerifier(harness.down_url() + "/.well-known/jwks.json")
        cases = [
            ("missing", self.verifier, None, 401, "token-missing", "Bearer"),
            ("tampered", self.verifier, tampered, 401, "signature-invalid", invalid.format("signature-invalid")),
            ("another sidecar's key", self.verifier, self.env.token(self.env.other), 401, "signature-invalid",
             invalid.format("signature-invalid")),
            ("expired", self.verifier, resign(good, self.env.key, iat=now - 600, nbf=now - 600, exp=now - 60), 401,
             "token-expired", invalid.format("token-expired")),
            ("for another service", self.verifier, self.env.token(host="billing.internal"), 401,
             "audience-mismatch", invalid.format("audience-mismatch")),
            ("no keys", down, good, 503, "jwks-unavailable", None),
        ]
        for name, v, tok, status, reason, challenge in cases:
            with self.subTest(name):
                got, headers, j = self.call(v, "/whoami", tok)
                self.assertEqual(got, status, j)
                self.assertEqual(headers.get("www-authenticate"), challenge)
                self.assertEqual((headers.get("cache-control"), headers.get("x-content-type-options")),
                                 ("no-store", "nosniff"))
                self.assertEqual(j, {"allow": False, "deny_reasons": [], "reason": reason})

    def test_excluded_path(self) -> None:
        status, _, j = self.call(self.verifier, "/healthz", None)
        self.assertEqual((status, j["claims"]), (200, None), j)


def whoami_body(claims: object, decision: object) -> dict:
    assert decision is None or isinstance(decision, TokenDecision), decision
    return {"claims": claims, "subject": decision.subject if decision else None,
            "tenant_id": decision.tenant_id if decision else None, "reason": decision.reason if decision else None}


class FlaskIdentityTest(IdentityBehaviour, unittest.TestCase):
    def call(self, verifier, path, identity):
        from flask import Flask, g, jsonify

        from svc_sdk.flask import SvcAuth

        app = Flask(__name__)
        auth = SvcAuth(app, identity=verifier, exclude=("/healthz",))
        self.assertIsNone(auth.client, "no sidecar client is made")

        @app.get("/whoami")
        def whoami():
            return jsonify(whoami_body(g.claims, g.svc_decision))

        @app.get("/healthz")
        def healthz():
            return jsonify(whoami_body(g.claims, g.svc_decision))

        resp = app.test_client().get(path, headers={IDENTITY_HEADER: identity} if identity else {})
        return resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.data)


    def test_require_action_beside_identity(self):
        # require_action still asks the sidecar's policy, with a client of
        # the app's settings made when a view first needs it.
        from flask import Flask, g, jsonify

        from svc_sdk.flask import SvcAuth, require_action

        _, plain = harness.shared()
        app = Flask(__name__)
        app.config.update(SVC_SIDECAR_URL=plain.url, SVC_FAIL_MODE="closed", SVC_TIMEOUT=harness.CALL_TIMEOUT)
        auth = SvcAuth(app, identity=self.verifier)

        @app.get("/orders/<order_id>/delete")
        @require_action("orders:delete", resource_id_arg="order_id")
        def delete(order_id):
            return jsonify(claims=g.claims)

        @app.get("/orders/<order_id>")
        @require_action("orders:read", resource_id_arg="order_id")
        def order(order_id):
            return jsonify(claims=g.claims, decision_id=g.svc_decision.decision_id)

        bearer = self.env.idp.token(harness.claims())
        headers = {IDENTITY_HEADER: self.env.token(), "Authorization": f"Bearer {bearer}"}
        resp = app.test_client().get("/orders/1", headers=headers)
        self.assertEqual(resp.status_code, 200, resp.data)
        self.assertTrue(resp.get_json()["decision_id"])
        self.assertIs(app.extensions["svc_sdk"], auth)
        self.assertEqual(auth.client.sidecar_url, plain.url)
        resp = app.test_client().get("/orders/1/delete", headers=headers)
        self.assertEqual((resp.status_code, resp.get_json()["reason"]), (403, "policy-deny"))
        # Without the identity token the middleware refuses first.
        resp = app.test_client().get("/orders/1", headers={"Authorization": f"Bearer {bearer}"})
        self.assertEqual((resp.status_code, resp.get_json()["reason"]), (401, "token-missing"))


class FastAPIIdentityTest(IdentityBehaviour, unittest.TestCase):
    def call(self, verifier, path, identity):
        from svc_sdk.fastapi import SvcMiddleware

        app = FastAPI()
        app.add_middleware(SvcMiddleware, identity=verifier, exclude=("/healthz",))

        @app.get("/whoami")
        async def whoami(request: Request):
            return whoami_body(request.state.svc_user, request.state.svc_decision)

        @app.get("/healthz")
        async def healthz(request: Request):
            return whoami_body(request.state.svc_user, request.state.svc_decision)

        with TestClient(app) as tc:
            resp = tc.get(path, headers={IDENTITY_HEADER: identity} if identity else {})
        return resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, resp.json()


def _django_whoami(request):
    from django.http import JsonResponse

    return JsonResponse(whoami_body(request.svc_claims, request.svc_decision))


def _urlpatterns():
    from django.urls import path

    return [path("whoami", _django_whoami), path("healthz", _django_whoami)]


urlpatterns = _urlpatterns()


class DjangoIdentityTest(IdentityBehaviour, unittest.TestCase):
    def call(self, verifier, path, identity):
        from django.test import Client as DjangoClient, override_settings

        headers = {"HTTP_X_SVC_IDENTITY": identity} if identity else {}
        with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=["svc_sdk.django.SvcMiddleware"],
                               SVC_IDENTITY=verifier, SVC_EXCLUDE=("/healthz",),
                               SVC_SIDECAR_URL=harness.down_url(), SVC_FAIL_MODE="closed"):
            resp = DjangoClient().get("/" + path.lstrip("/"), **headers)
        return resp.status_code, {k.lower(): v for k, v in resp.items()}, json.loads(resp.content)


if __name__ == "__main__":
    unittest.main()
