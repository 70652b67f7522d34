"""svc_sdk.saml and the middleware's SAML behaviour.

The sign-on runs against the real sidecar's SAML gateway and a samlify
identity provider (e2e/samlidp/server.mjs, run with node; its npm packages
come from e2e/package-lock.json): the gateway's login, the IdP's signed
answer posted to the gateway's ACS with the request cookie the login set,
and the session cookie it issues, which the Flask, FastAPI and Django
middleware then accept in place of an Authorization header.
"""

from __future__ import annotations

import http.client
import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

import django
from django.conf import settings

if not settings.configured:
    settings.configure(DEBUG=False, SECRET_KEY="svc-sdk-tests-only", ALLOWED_HOSTS=["testserver"],
                       ROOT_URLCONF=__name__, MIDDLEWARE=["svc_sdk.django.SvcMiddleware"],
                       INSTALLED_APPS=[], DATABASES={})
    django.setup()

import flask  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.test import Client as DjangoClient, override_settings  # noqa: E402
from django.urls import path  # noqa: E402
from fastapi import Depends, FastAPI, Request  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

import harness  # noqa: E402
from svc_sdk import Client  # noqa: E402
from svc_sdk.django import require_action as django_action  # noqa: E402
from svc_sdk.fastapi import SvcMiddleware as FastAPIMiddleware, require_action as fastapi_action  # noqa: E402
from svc_sdk.flask import SvcAuth, require_action as flask_action  # noqa: E402
from svc_sdk.saml import (AttributeMapping, SamlConfig, cookie_value, login_url, login_redirect_url,  # noqa: E402
                          prefers_html, safe_return_to, secure_cookies, session_token, wants_login_redirect)

EMAIL = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
# The svc.toml both SDKs' configuration tests read.
SHARED_SVC_TOML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "saml", "svc.toml")


class ConfigTest(unittest.TestCase):
    def write(self, text: str) -> str:
        d = tempfile.mkdtemp(prefix="samlcfg-")
        self.addCleanup(shutil.rmtree, d, True)
        p = os.path.join(d, "svc.toml")
        with open(p, "w") as f:
            f.write(text)
        return p

    def test_defaults_are_the_sidecars(self):
        c = SamlConfig.load(env={}, config_file=None)
        self.assertEqual(c, SamlConfig())
        self.assertEqual((c.entity_id, c.acs_url, c.idp_metadata_url), ("", "", ""))
        self.assertEqual(c.clock_skew_seconds, 30)
        self.assertEqual(c.attribute_mapping, AttributeMapping(EMAIL, "role", "tenant_id"))
        self.assertEqual((c.cookie_name, c.path_prefix, c.gateway_url), ("svc_session", "/auth/saml",
                                                                         "http://127.0.0.1:7701"))
        self.assertIsNone(c.sp_private_key_pem)

    def test_file_then_environment_then_arguments(self):
        p = SHARED_SVC_TOML
        c = SamlConfig.load(env={}, config_file=p)
        self.assertEqual(c.entity_id, "https://app.example/saml/metadata")
        self.assertEqual(c.acs_url, "https://app.example/auth/saml/acs")
        self.assertEqual(c.idp_metadata_url, "https://idp.example/metadata")
        self.assertEqual(c.clock_skew_seconds, 45)
        self.assertEqual(c.attribute_mapping, AttributeMapping(EMAIL, "groups", "org"))
        self.assertEqual((c.cookie_name, c.path_prefix), ("app_session", "/sso"))
        self.assertIsNone(c.sp_private_key_pem)
        self.assertTrue(c.prefixed_only, "an https acs_url: the gateway's cookies are Secure")

        secret = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n"
        env = {"SVC_SAML_COOKIE_NAME": "env_session", "SVC_SAML_CLOCK_SKEW_SECONDS": "10",
               "SVC_SAML_URL": "http://gw:7701/", "SVC_SAML_ATTRIBUTE_EMAIL": "mail",
               "SVC_SAML_SP_PRIVATE_KEY_PEM": secret}
        c = SamlConfig.load(env=env, config_file=p)
        self.assertEqual((c.cookie_name, c.clock_skew_seconds, c.gateway_url), ("env_session", 10, "http://gw:7701"))
        self.assertEqual(c.attribute_mapping, AttributeMapping("mail", "groups", "org"))
        self.assertEqual(c.sp_private_key_pem, secret)
        self.assertNotIn("c2VjcmV0", repr(c), "the private key is never printed")

        c = SamlConfig.load(env=env, config_file=p, cookie_name="arg_session", login_base_url="https://gw.example/")
        self.assertEqual((c.cookie_name, c.login_base_url), ("arg_session", "https://gw.example"))

    def test_bad_values_name_the_key(self):
        cases = [
            ("[sdk.saml]\nclock_skew_seconds = \"30\"\n", "sdk.saml.clock_skew_seconds must be an integer"),
            ("[sdk.saml]\nclock_skew_seconds = -1\n", "clock_skew_seconds must be a non-negative integer"),
            ("[sdk.saml]\ncookie_name = 3\n", "sdk.saml.cookie_name must be a string"),
            ("[sdk]\nsaml = \"x\"\n", "sdk.saml must be a table"),
            ("[sdk.saml]\nattribute_mapping = 1\n", "sdk.saml.attribute_mapping must be a table"),
            ("[sdk.saml\n", "not valid TOML"),
        ]
        for text, msg in cases:
            with self.subTest(text=text), self.assertRaisesRegex(ValueError, re.escape(msg)):
                SamlConfig.load(env={}, config_file=self.write(text))
        with self.assertRaisesRegex(ValueError, "SVC_SAML_CLOCK_SKEW_SECONDS='1s' is not a number of seconds"):
            SamlConfig.load(env={"SVC_SAML_CLOCK_SKEW_SECONDS": "1s"}, config_file=None)
        self.assertEqual(SamlConfig.load(env={}, config_file="/nonexistent/svc.toml"), SamlConfig())


class SessionCookieConfigTest(unittest.TestCase):
    """The session cookie as the sidecar names and reads it, whichever
    gateway (SAML or OpenID Connect) signs browsers in."""

    write = ConfigTest.write

    OIDC_ENV = {"SVC_OIDC_ISSUER_URL": "https://idp.example", "SVC_OIDC_REDIRECT_URL": "https://app.example/auth/oidc/callback"}

    def test_cookie_name_from_the_session_table(self):
        p = self.write("[sdk.session]\ncookie_name = \"sess\"\n\n[sdk.saml]\ncookie_name = \"old\"\n")
        self.assertEqual(SamlConfig.load(env={}, config_file=p).cookie_name, "sess")
        self.assertEqual(SamlConfig.load(env={}, config_file=self.write("[sdk.saml]\ncookie_name = \"old\"\n")).cookie_name,
                         "old")
        for env, want in (
            ({"SVC_SAML_COOKIE_NAME": "env_old"}, "env_old"),
            ({"SVC_SESSION_COOKIE_NAME": "env_new", "SVC_SAML_COOKIE_NAME": "env_old"}, "env_new"),
        ):
            with self.subTest(env=env):
                self.assertEqual(SamlConfig.load(env=env, config_file=p).cookie_name, want)
        self.assertEqual(SamlConfig.load(env={}, config_file=p, cookie_name="arg").cookie_name, "arg")
        with self.assertRaisesRegex(ValueError, re.escape("sdk.session.cookie_name must be a string")):
            SamlConfig.load(env={}, config_file=self.write("[sdk.session]\ncookie_name = 1\n"))

    def test_oidc_gateway_alone_reads_prefixed_only(self):
        c = SamlConfig.load(env=self.OIDC_ENV, config_file=None)
        self.assertEqual((c.acs_url, c.oidc_redirect_urls), ("", ("https://app.example/auth/oidc/callback",)))
        self.assertTrue(c.prefixed_only, "an https redirect_url: the OpenID Connect gateway's cookies are Secure")
        p = self.write("[sdk.oidc]\nissuer_url = \"https://idp.example\"\nredirect_url = \"https://app.example/auth/oidc/callback\"\n\n"
                       "[[sdk.oidc.providers]]\nname = \"b\"\ntenant = \"t\"\nissuer_url = \"https://idp-b.example\"\n")
        c = SamlConfig.load(env={}, config_file=p)
        # The provider's redirect_url defaults to [sdk.oidc]'s.
        self.assertEqual(c.oidc_redirect_urls, ("https://app.example/auth/oidc/callback",) * 2)
        self.assertTrue(c.prefixed_only)
        # Without an issuer_url [sdk.oidc]'s own keys are no provider.
        p = self.write("[sdk.oidc]\nredirect_url = \"https://app.example/auth/oidc/callback\"\n")
        self.assertFalse(SamlConfig.load(env={}, config_file=p).prefixed_only)

    def test_one_gateway_on_loopback_http_keeps_the_fallback(self):
        # Local development: a gateway on plain http on loopback sets
        # unprefixed cookies, so the unprefixed cookie stays read.
        for env, text in (
            ({"SVC_SAML_ACS_URL": "https://app.example/auth/saml/acs", "SVC_OIDC_ISSUER_URL": "http://127.0.0.1:9000",
              "SVC_OIDC_REDIRECT_URL": "http://127.0.0.1:8080/auth/oidc/callback"}, None),
            ({}, "[sdk.oidc]\nissuer_url = \"https://idp.example\"\nredirect_url = \"https://app.example/auth/oidc/callback\"\n\n"
                 "[[sdk.oidc.providers]]\nname = \"dev\"\ntenant = \"t\"\nissuer_url = \"http://127.0.0.1:9000\"\n"
                 "redirect_url = \"http://localhost:8080/auth/oidc/callback\"\n"),
        ):
            with self.subTest(env=env, text=text):
                c = SamlConfig.load(env=env, config_file=self.write(text) if text else None)
                self.assertFalse(c.prefixed_only)
        c = SamlConfig(acs_url="https://app.example/auth/saml/acs", oidc_redirect_urls=("http://[::1]:8080/cb",))
        self.assertFalse(c.prefixed_only)


class UntrustedInputTest(unittest.TestCase):
    def test_headers_never_raise(self):
        import random
        for seed in range(3000):
            r = random.Random(seed)
            s = "".join(r.choice('text/html;q=0.,*/ajson"=\x00\u00e9 ') for _ in range(r.randrange(40)))
            with self.subTest(seed=seed):
                self.assertIsInstance(prefers_html(s), bool)
                self.assertIsInstance(cookie_value(s, "svc_session"), str)
                self.assertTrue(safe_return_to(s) in ("/", s))

    def test_unknown_arguments_are_refused(self):
        with self.assertRaisesRegex(TypeError, "cookiename"):
            SamlConfig.load(env={}, config_file=None, cookiename="x")


class BrowserRuleTest(unittest.TestCase):
    def test_prefers_html(self):
        cases = [
            (BROWSER, True),
            ("text/html", True),
            ("application/json", False),
            ("*/*", False),
            ("", False),
            (None, False),
            ("application/json, text/html", True),
            ("text/html;q=0.5, application/json", False),
            ("text/html;q=0.5, */*", False),
            ("text/html;q=0.5, application/*;q=0.4, */*", True),
            ("text/html;q=abc", False),
            ("text/html;q=2", False),
        ]
        for accept, want in cases:
            with self.subTest(accept=accept):
                self.assertIs(prefers_html(accept), want)

    def test_redirect_only_browsers_refused_for_their_token(self):
        saml = SamlConfig()
        self.assertTrue(wants_login_redirect("GET", BROWSER, None))
        self.assertTrue(wants_login_redirect("head", BROWSER, ""))
        self.assertFalse(wants_login_redirect("POST", BROWSER, None))
        self.assertFalse(wants_login_redirect("GET", "application/json", None))
        self.assertFalse(wants_login_redirect("GET", BROWSER, "Bearer x"))
        self.assertEqual(login_redirect_url(401, "GET", BROWSER, None, "/a?b=1", saml),
                         "/auth/saml/login?return_to=%2Fa%3Fb%3D1")
        for status in (403, 429, 503):
            self.assertIsNone(login_redirect_url(status, "GET", BROWSER, None, "/a", saml))

    def test_login_url_and_return_to(self):
        self.assertEqual(login_url("/app/page?x=1"), "/auth/saml/login?return_to=%2Fapp%2Fpage%3Fx%3D1")
        saml = SamlConfig(path_prefix="/sso", login_base_url="https://app.example.com")
        self.assertEqual(login_url("/a", saml), "https://app.example.com/sso/login?return_to=%2Fa")
        for bad in ("https://evil.example/", "//evil.example/", "/\\evil.example", "relative", "/a\nb", "/a\\b",
                    "/" + "a" * 2048, None, ""):
            with self.subTest(bad=bad):
                self.assertEqual(safe_return_to(bad), "/")
        self.assertEqual(cookie_value('a=1; svc_session="t.o.k"; b=2', "svc_session"), "t.o.k")
        self.assertEqual(cookie_value("svc_session_req=x", "svc_session"), "")

    def test_session_token_prefers_the_host_cookie(self):
        # The gateway's __Host- cookie decides wherever it stands: an
        # unprefixed one a sibling subdomain tossed (sent first when its
        # path is longer) never displaces it, nor fills an empty one.
        for header, want in (
            ("svc_session=plain", "plain"),
            ("__Host-svc_session=host", "host"),
            ("svc_session=tossed; __Host-svc_session=host", "host"),
            ("__Host-svc_session=host; svc_session=tossed", "host"),
            ("svc_session=tossed; __Host-svc_session=", ""),
            ("__Host-svc_session_req=r; __Host-other=o", ""),
            ("", ""),
        ):
            with self.subTest(header=header):
                self.assertEqual(session_token(header, "svc_session"), want)
        self.assertEqual(session_token("app=tossed; __Host-app=host", "app"), "host")
        self.assertEqual(session_token(None), "")

    def test_session_token_prefixed_only(self):
        # Behind a Secure gateway an unprefixed cookie can only be one a
        # sibling subdomain tossed in: alone it is no session.
        for header, want in (
            ("svc_session=tossed", ""),
            ("__Host-svc_session=host", "host"),
            ("svc_session=tossed; __Host-svc_session=host", "host"),
            ("__Host-svc_session=host; svc_session=tossed", "host"),
            ("svc_session=tossed; __Host-svc_session=", ""),
            ("", ""),
        ):
            with self.subTest(header=header):
                self.assertEqual(session_token(header, "svc_session", prefixed_only=True), want)
        self.assertEqual(session_token(None, prefixed_only=True), "")

    def test_prefixed_only_follows_the_acs_url(self):
        # The sidecar's rule (internal/signincookie): Secure, so prefixed,
        # everywhere but plain http on a loopback host; without an
        # acs_url nothing is known and the unprefixed cookie stays read.
        for acs_url, want in (
            ("", False),
            ("https://app.example/auth/saml/acs", True),
            ("https://127.0.0.1:8443/auth/saml/acs", True),
            ("http://app.example/auth/saml/acs", True),
            ("http://127.0.0.1:7701/auth/saml/acs", False),
            ("http://127.8.9.10/auth/saml/acs", False),
            ("HTTP://LocalHost:8000/auth/saml/acs", False),
            ("http://[::1]:7701/auth/saml/acs", False),
            ("http://[::ffff:127.0.0.1]/auth/saml/acs", False),
            ("http://localhost.example/auth/saml/acs", True),
            ("http://128.0.0.1/auth/saml/acs", True),
            ("http://[::1/auth/saml/acs", True),
        ):
            with self.subTest(acs_url=acs_url):
                self.assertIs(SamlConfig(acs_url=acs_url).prefixed_only, want)
                if acs_url:
                    self.assertIs(secure_cookies(acs_url), want)


def _http(method: str, url: str, headers: dict[str, str] | None = None, body: str | None = None):
    """One request, redirects not followed: (status, headers (lower-case
    names; Set-Cookie as a list), body)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=harness.CALL_TIMEOUT)
    try:
        conn.request(method, u.path + ("?" + u.query if u.query else ""), body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        h: dict = {k.lower(): v for k, v in r.getheaders()}
        h["set-cookie"] = r.headers.get_all("Set-Cookie") or []
        return r.status, h, data
    finally:
        conn.close()


class SamlIdP:
    """The samlify identity provider of the e2e tests, run with node."""

    def __init__(self, dir: str, sp_metadata_url: str) -> None:
        node = shutil.which("node")
        script = harness.REPO / "e2e" / "samlidp" / "server.mjs"
        if not node:
            harness.missing("node", "apt-get install nodejs")
        if not (harness.REPO / "e2e" / "node_modules" / "samlify" / "package.json").exists():
            harness.missing("npm package samlify", "run scripts/install-test-deps.sh, or npm ci in e2e/")
        if not shutil.which("openssl"):
            harness.missing("openssl", "apt-get install openssl")
        key, cert = os.path.join(dir, "idp-key.pem"), os.path.join(dir, "idp-cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=idp", "-days", "1",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        self.proc = subprocess.Popen([node, str(script), "--key", key, "--cert", cert, "--sp-metadata",
                                      sp_metadata_url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        found = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.append(line)
                if line.startswith("samlidp listening on "):
                    self.url = line.split()[-1]
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(60) or not getattr(self, "url", ""):
            self.close()
            raise RuntimeError(f"samlidp did not start: {''.join(lines)}")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def sign_in(gateway: str, return_to: str = "/whoami", user: str = "alice") -> str:
    """A browser's SP-initiated sign-on through the gateway and the IdP;
    the session token the gateway's cookie carries."""
    login = f"{gateway}/auth/saml/login?return_to={urllib.parse.quote(return_to, safe='')}"
    deadline = time.monotonic() + 60
    while True:
        status, h, body = _http("GET", login, {"Accept": BROWSER})
        # 503 saml-idp-unavailable until the sidecar has fetched the IdP's
        # metadata, in the background after it started.
        if status != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 302, (status, body)
    # The login binds the sign-on to this browser with a request cookie,
    # which the ACS requires: the browser keeps it.
    req = [c.split(";")[0] for c in h["set-cookie"] if c.startswith("svc_session_req=")]
    assert req, h["set-cookie"]
    to_idp = h["location"] + "&user=" + user
    status, _, body = _http("GET", to_idp, {"Accept": "application/json"})
    assert status == 200, (status, body)
    answer = json.loads(body)
    assert answer["RelayState"] == return_to, answer
    form = urllib.parse.urlencode({"SAMLResponse": answer["SAMLResponse"], "RelayState": answer["RelayState"]})
    status, h, body = _http("POST", answer["acs_url"], {"Content-Type": "application/x-www-form-urlencoded",
                                                        "Accept": BROWSER, "Cookie": req[0]}, form)
    assert status == 303, (status, body)
    assert h["location"] == return_to, h
    session = [c.split(";")[0] for c in h["set-cookie"] if c.startswith("svc_session=")]
    assert session, h["set-cookie"]
    return session[0].split("=", 1)[1]


# The Django routes of the flow (ROOT_URLCONF is this module in the test).
def dj_whoami(request):
    return JsonResponse({"claims": request.svc_claims})


@django_action("orders:read", resource_id_kwarg="order_id")
def dj_order(request, order_id):
    return JsonResponse({"claims": request.svc_claims})


urlpatterns = [path("whoami", dj_whoami), path("orders/<str:order_id>", dj_order)]


class SignOnTest(unittest.TestCase):
    """The session cookie and the login redirect of each framework's
    middleware, with a token the real gateway issued after a samlify
    sign-on."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="svc-saml-")
        cls.saml_addr = harness.free_addr()
        cls.gateway = f"http://{cls.saml_addr}"
        cls.idp = SamlIdP(cls.dir, f"{cls.gateway}/auth/saml/metadata")
        jwks_idp = harness.IdP()
        cls.jwks_idp = jwks_idp
        try:
            cls.sidecar = harness.Sidecar(jwks_idp, {
                "SVC_SAML_ADDR": cls.saml_addr,
                "SVC_SAML_ENTITY_ID": f"{cls.gateway}/auth/saml/metadata",
                "SVC_SAML_ACS_URL": f"{cls.gateway}/auth/saml/acs",
                "SVC_SAML_IDP_METADATA_URL": f"{cls.idp.url}/metadata",
            })
        except Exception:
            cls.idp.close()
            raise
        cls.client = Client(cls.sidecar.url, "closed", harness.CALL_TIMEOUT, config_file=None)
        cls.saml = SamlConfig(login_base_url=cls.gateway)
        cls.token = sign_in(cls.gateway)

    @classmethod
    def tearDownClass(cls):
        cls.sidecar.stop()
        cls.idp.close()
        cls.jwks_idp.close()
        shutil.rmtree(cls.dir, True)

    # Each framework answers call(path, headers) -> (status, headers, body).
    # saml replaces the test's SamlConfig; prefixed_only is the
    # middleware's option (Django: SVC_SESSION_PREFIXED_ONLY).
    def flask_call(self, method, target, headers, saml=None, prefixed_only=None):
        app = flask.Flask(__name__)
        SvcAuth(app, client=self.client, saml=saml or self.saml, login_redirect=True, prefixed_only=prefixed_only)

        @app.route("/whoami", methods=["GET", "POST", "HEAD"])
        def whoami():
            return {"claims": flask.g.claims}

        @app.get("/orders/<order_id>")
        @flask_action("orders:read", resource_id_arg="order_id")
        def order(order_id):
            return {"claims": flask.g.claims}

        # Without its cookie jar, which would replace the Cookie header.
        r = app.test_client(use_cookies=False).open(target, method=method, headers=headers)
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.data

    def fastapi_call(self, method, target, headers, saml=None, prefixed_only=None):
        app = FastAPI()
        app.add_middleware(FastAPIMiddleware, client=self.client, saml=saml or self.saml, login_redirect=True,
                           prefixed_only=prefixed_only)

        @app.api_route("/whoami", methods=["GET", "POST", "HEAD"])
        async def whoami(request: Request):
            return {"claims": request.state.svc_user}

        @app.get("/orders/{order_id}")
        async def order(order_id: str, request: Request,
                        decision=Depends(fastapi_action("orders:read", resource_id_param="order_id"))):
            return {"claims": request.state.svc_user}

        with TestClient(app) as tc:
            r = tc.request(method, target, headers=headers, follow_redirects=False)
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content

    def django_call(self, method, target, headers, saml=None, prefixed_only=None):
        extra = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}
        with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=["svc_sdk.django.SvcMiddleware"],
                               SVC_SIDECAR_URL=self.client.sidecar_url, SVC_FAIL_MODE="closed",
                               SVC_TIMEOUT=self.client.timeout, SVC_SAML=saml or self.saml, SVC_LOGIN_REDIRECT=True,
                               SVC_EXCLUDE=(), SVC_SESSION_PREFIXED_ONLY=prefixed_only):
            r = DjangoClient().generic(method, target, **extra)
        return r.status_code, {k.lower(): v for k, v in r.items()}, r.content

    def frameworks(self):
        return (("flask", self.flask_call), ("fastapi", self.fastapi_call), ("django", self.django_call))

    def test_session_cookie_authenticates(self):
        cookie = f"other=1; svc_session={self.token}"
        for name, call in self.frameworks():
            with self.subTest(framework=name):
                for target in ("/whoami", "/orders/1"):
                    status, _, body = call("GET", target, {"Cookie": cookie, "Accept": BROWSER})
                    self.assertEqual(status, 200, body)
                    claims = json.loads(body)["claims"]
                    self.assertEqual(claims["email"], "alice@example.com")
                    self.assertEqual(claims["tenant_id"], "acme")
                    self.assertEqual(claims["roles"], ["admin"])

    def test_host_cookie_decides(self):
        # A sibling subdomain tosses svc_session next to the gateway's
        # __Host-svc_session: the prefixed cookie decides, whichever is
        # valid and wherever it stands.
        for name, call in self.frameworks():
            with self.subTest(framework=name):
                for cookie in (f"svc_session=a.b.c; __Host-svc_session={self.token}",
                               f"__Host-svc_session={self.token}; svc_session=a.b.c"):
                    status, _, body = call("GET", "/whoami", {"Cookie": cookie, "Accept": "application/json"})
                    self.assertEqual(status, 200, (cookie, body))
                    self.assertEqual(json.loads(body)["claims"]["email"], "alice@example.com")
                status, _, body = call("GET", "/whoami", {"Cookie": f"svc_session={self.token}; __Host-svc_session=a.b.c",
                                                          "Accept": "application/json"})
                self.assertEqual(status, 401, body)
                self.assertEqual(json.loads(body)["reason"], "token-malformed")

    def test_tossed_cookie_is_no_session_behind_a_secure_gateway(self):
        # The gateway sets only __Host-svc_session behind an https
        # acs_url: an unprefixed svc_session there was tossed in by a
        # sibling subdomain for the parent domain, and a browser without a
        # session of its own must not be signed in as whoever it names.
        secure = dataclasses.replace(self.saml, acs_url="https://app.example/auth/saml/acs")
        for name, call in self.frameworks():
            with self.subTest(framework=name):
                for target in ("/whoami", "/orders/1"):
                    status, h, body = call("GET", target, {"Cookie": f"svc_session={self.token}",
                                                           "Accept": "application/json"}, saml=secure)
                    self.assertEqual(status, 401, (target, body))
                    self.assertEqual(json.loads(body)["reason"], "token-missing")
                    status, h, _ = call("GET", target, {"Cookie": f"svc_session={self.token}", "Accept": BROWSER},
                                        saml=secure)
                    self.assertEqual(status, 302, target)
                    self.assertTrue(h.get("location", "").startswith(f"{self.gateway}/auth/saml/login?"), h)
                    for cookie in (f"__Host-svc_session={self.token}",
                                   f"svc_session=a.b.c; __Host-svc_session={self.token}"):
                        status, _, body = call("GET", target, {"Cookie": cookie, "Accept": "application/json"},
                                               saml=secure)
                        self.assertEqual(status, 200, (target, cookie, body))
                        self.assertEqual(json.loads(body)["claims"]["email"], "alice@example.com")

    def test_loopback_gateway_reads_the_unprefixed_cookie(self):
        # On plain http on loopback (local development) the gateway's
        # cookies are unprefixed: they are read.
        local = dataclasses.replace(self.saml, acs_url=f"{self.gateway}/auth/saml/acs")
        for name, call in self.frameworks():
            with self.subTest(framework=name):
                for target in ("/whoami", "/orders/1"):
                    status, _, body = call("GET", target, {"Cookie": f"svc_session={self.token}",
                                                           "Accept": "application/json"}, saml=local)
                    self.assertEqual(status, 200, (target, body))
                    self.assertEqual(json.loads(body)["claims"]["email"], "alice@example.com")

    def test_tossed_cookie_is_no_session_behind_a_secure_oidc_gateway(self):
        # The same behind an OpenID Connect gateway alone: its redirect_url
        # is https, so it sets only __Host-svc_session.
        for env, text in (
            (SessionCookieConfigTest.OIDC_ENV, None),
            ({}, "[sdk.oidc]\nissuer_url = \"https://idp.example\"\nredirect_url = \"https://app.example/auth/oidc/callback\"\n"),
        ):
            d = tempfile.mkdtemp(prefix="oidccfg-")
            self.addCleanup(shutil.rmtree, d, True)
            p = os.path.join(d, "svc.toml")
            with open(p, "w") as f:
                f.write(text or "")
            oidc = SamlConfig.load(env=env, config_file=p, login_base_url=self.gateway)
            for name, call in self.frameworks():
                with self.subTest(framework=name, env=env, text=text):
                    status, _, body = call("GET", "/whoami", {"Cookie": f"svc_session={self.token}",
                                                              "Accept": "application/json"}, saml=oidc)
                    self.assertEqual(status, 401, body)
                    self.assertEqual(json.loads(body)["reason"], "token-missing")
                    status, _, body = call("GET", "/whoami", {"Cookie": f"__Host-svc_session={self.token}",
                                                              "Accept": "application/json"}, saml=oidc)
                    self.assertEqual(status, 200, body)
                    self.assertEqual(json.loads(body)["claims"]["email"], "alice@example.com")
        mixed = dataclasses.replace(self.saml, acs_url="https://app.example/auth/saml/acs",
                                    oidc_redirect_urls=("http://127.0.0.1:8080/auth/oidc/callback",))
        for name, call in self.frameworks():
            with self.subTest(framework=name, config="mixed"):
                status, _, body = call("GET", "/whoami", {"Cookie": f"svc_session={self.token}",
                                                          "Accept": "application/json"}, saml=mixed)
                self.assertEqual(status, 200, body)

    def test_prefixed_only_option_overrides_the_rule(self):
        secure = dataclasses.replace(self.saml, acs_url="https://app.example/auth/saml/acs")
        for name, call in self.frameworks():
            with self.subTest(framework=name):
                for target in ("/whoami", "/orders/1"):
                    status, _, body = call("GET", target, {"Cookie": f"svc_session={self.token}",
                                                           "Accept": "application/json"}, prefixed_only=True)
                    self.assertEqual(status, 401, (target, body))
                    self.assertEqual(json.loads(body)["reason"], "token-missing")
                    status, _, body = call("GET", target, {"Cookie": f"__Host-svc_session={self.token}",
                                                           "Accept": "application/json"}, prefixed_only=True)
                    self.assertEqual(status, 200, (target, body))
                    status, _, body = call("GET", target, {"Cookie": f"svc_session={self.token}",
                                                           "Accept": "application/json"},
                                           saml=secure, prefixed_only=False)
                    self.assertEqual(status, 200, (target, body))

    def test_authorization_header_wins_over_the_cookie(self):
        # As at the sidecar: the cookie is read only without an
        # Authorization header, and a refused header is not redirected.
        for name, call in self.frameworks():
            with self.subTest(framework=name):
                status, _, body = call("GET", "/whoami", {"Cookie": f"svc_session={self.token}",
                                                          "Authorization": "Bearer not-a-token", "Accept": BROWSER})
                self.assertEqual(status, 401, body)
                self.assertEqual(json.loads(body)["reason"], "token-malformed")

    def test_browser_without_session_is_sent_to_sign_in(self):
        want = f"{self.gateway}/auth/saml/login?return_to=%2Fwhoami%3Ftab%3D2"
        for name, call in self.frameworks():
            with self.subTest(framework=name):
                for method in ("GET", "HEAD"):
                    status, h, _ = call(method, "/whoami?tab=2", {"Accept": BROWSER})
                    self.assertEqual((status, h.get("location")), (302, want), method)
                # An expired or foreign session: sign in again.
                status, h, _ = call("GET", "/orders/9", {"Accept": BROWSER, "Cookie": "svc_session=a.b.c"})
                self.assertEqual((status, h.get("location")),
                                 (302, f"{self.gateway}/auth/saml/login?return_to=%2Forders%2F9"))

    def test_api_clients_get_the_401(self):
        for name, call in self.frameworks():
            with self.subTest(framework=name):
                for method, accept in (("GET", "application/json"), ("GET", "*/*"), ("POST", BROWSER)):
                    status, h, body = call(method, "/whoami", {"Accept": accept})
                    self.assertEqual(status, 401, (method, accept, body))
                    self.assertNotIn("location", h)
                    self.assertEqual(json.loads(body)["reason"], "token-missing")

    def test_the_gateway_session_is_the_sidecars(self):
        # The cookie's token, given as a bearer token, is what the sidecar
        # verified: the SDK did no token logic of its own.
        d = self.client.validate_token(self.token)
        self.assertTrue(d.allowed, d.reason)
        self.assertEqual(d.claims["email"], "alice@example.com")


if __name__ == "__main__":
    unittest.main()
