// @svc/sdk/saml: the login URL, the session cookie, and the Express ACS
// helper completing the browser flow against an HTTP server that speaks the
// SAML gateway's contract (303 + HttpOnly cookie for a browser, JSON token
// for Accept: application/json), with the issued token verified by the
// real sidecar.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import express from "express";
import Fastify from "fastify";

import { SvcClient } from "@svc/sdk";
import { requireAction as expressAction, svcExpress } from "@svc/sdk/express";
import { requireAction as fastifyAction, svcFastify } from "@svc/sdk/fastify";
import { exchangeAssertion, loginUrl, resolveSamlConfig, safeReturnTo, SamlError, samlAcs, samlLoginRedirect,
  secureCookies, sessionPrefixedOnly, sessionToken } from "@svc/sdk/saml";

import { CALL_TIMEOUT_MS, claims, IdP, serve, Sidecar, startSidecar } from "./harness.mjs";

describe("helpers", () => {
  test("loginUrl", () => {
    const cases = [
      ["/app/page?x=1", {}, "/auth/saml/login?return_to=%2Fapp%2Fpage%3Fx%3D1"],
      [undefined, {}, "/auth/saml/login?return_to=%2F"],
      ["/a", { prefix: "/sso/", baseUrl: "https://app.example.com/" }, "https://app.example.com/sso/login?return_to=%2Fa"],
      ["https://evil.example.com/", {}, "/auth/saml/login?return_to=%2F"],
      ["//evil.example.com/", {}, "/auth/saml/login?return_to=%2F"],
    ];
    for (const [to, opts, want] of cases) assert.equal(loginUrl(to, opts), want, String(to));
  });

  test("safeReturnTo", () => {
    const cases = [["/x?y=1", "/x?y=1"], ["", "/"], [null, "/"], ["x", "/"], ["/\\evil", "/"], ["//evil", "/"],
      ["/a\r\nSet-Cookie: x", "/"], ["/a\\b", "/"], ["/" + "a".repeat(3000), "/"]];
    for (const [input, want] of cases) assert.equal(safeReturnTo(input), want, String(input));
  });

  test("sessionToken", () => {
    const cases = [["a=1; svc_session=tok.en.sig; b=2", undefined, "tok.en.sig"], ["svc_session=\"q\"", undefined, "q"],
      ["other=1", undefined, ""], [undefined, undefined, ""], ["sid=abc", "sid", "abc"], ["xsvc_session=1", undefined, ""],
      // The gateway's __Host- cookie decides wherever it stands: an
      // unprefixed one a sibling subdomain tossed never displaces it.
      ["__Host-svc_session=host", undefined, "host"], ["svc_session=tossed; __Host-svc_session=host", undefined, "host"],
      ["__Host-svc_session=host; svc_session=tossed", undefined, "host"], ["svc_session=tossed; __Host-svc_session=", undefined, ""],
      ["sid=tossed; __Host-sid=host", "sid", "host"], ["__Host-svc_session_req=r", undefined, ""]];
    for (const [header, name, want] of cases) assert.equal(sessionToken(header, name), want, String(header));
  });

  test("sessionToken, prefixed only", () => {
    // Behind a Secure gateway an unprefixed cookie can only be one a
    // sibling subdomain tossed in: alone it is no session.
    const cases = [["svc_session=tossed", ""], ["__Host-svc_session=host", "host"],
      ["svc_session=tossed; __Host-svc_session=host", "host"], ["__Host-svc_session=host; svc_session=tossed", "host"],
      ["svc_session=tossed; __Host-svc_session=", ""], ["", ""], [undefined, ""]];
    for (const [header, want] of cases) assert.equal(sessionToken(header, "svc_session", true), want, String(header));
  });

  test("sessionPrefixedOnly follows the acsUrl", () => {
    // The sidecar's rule (internal/signincookie): Secure, so prefixed,
    // everywhere but plain http on a loopback host; without an acsUrl
    // nothing is known and the unprefixed cookie stays read.
    const cases = [
      ["", false],
      ["https://app.example/auth/saml/acs", true],
      ["https://127.0.0.1:8443/auth/saml/acs", true],
      ["http://app.example/auth/saml/acs", true],
      ["http://127.0.0.1:7701/auth/saml/acs", false],
      ["http://127.8.9.10/auth/saml/acs", false],
      ["HTTP://LocalHost:8000/auth/saml/acs", false],
      ["http://[::1]:7701/auth/saml/acs", false],
      ["http://localhost.example/auth/saml/acs", true],
      ["http://128.0.0.1/auth/saml/acs", true],
      ["http://[::1/auth/saml/acs", true],
    ];
    for (const [acsUrl, want] of cases) {
      assert.equal(sessionPrefixedOnly({ acsUrl }), want, acsUrl);
      if (acsUrl) assert.equal(secureCookies(acsUrl), want, acsUrl);
    }
  });
});

describe("the session cookie behind a Secure gateway", () => {
  const SECURE = { cookieName: "svc_session", acsUrl: "https://app.example/auth/saml/acs" };
  const LOCAL = { cookieName: "svc_session", acsUrl: "http://127.0.0.1:7701/auth/saml/acs" };
  let idp, client, stop;
  before(async () => ({ idp, client, stop } = await startSidecar()));
  after(() => stop?.());

  // Each framework serves GET /whoami (the middleware) and GET /orders/:id
  // (requireAction alone) with the session options opts.
  async function startExpress(opts) {
    const a = express();
    a.get("/orders/:id", expressAction("orders:read", { client, resourceIdParam: "id", ...opts }),
      (req, res) => res.json({ claims: req.svcClaims }));
    a.use(svcExpress({ client, ...opts }));
    a.get("/whoami", (req, res) => res.json({ claims: req.svcClaims }));
    return serve(a);
  }
  async function startFastify(opts) {
    const a = Fastify();
    a.get("/orders/:id", { preHandler: fastifyAction("orders:read", { client, resourceIdParam: "id", ...opts }) },
      async (request) => ({ claims: request.svcClaims }));
    await a.register(async (child) => {
      await child.register(svcFastify, { client, ...opts });
      child.get("/whoami", async (request) => ({ claims: request.svcClaims }));
    });
    const url = await a.listen({ port: 0, host: "127.0.0.1" });
    return { url, close: () => a.close() };
  }
  const frameworks = [["express", startExpress], ["fastify", startFastify]];

  // { path: [status, reason or email] } for each cookie header.
  async function answers(start, opts, cookie) {
    const app = await start(opts);
    try {
      const got = {};
      for (const path of ["/whoami", "/orders/1"]) {
        const r = await fetch(app.url + path, { headers: { cookie, accept: "application/json" } });
        const body = await r.json();
        got[path] = [r.status, r.status === 200 ? body.claims.email : body.reason];
      }
      return got;
    } finally {
      await app.close();
    }
  }
  const tok = () => idp.token(claims({ email: "alice@example.com" }));
  const admitted = { "/whoami": [200, "alice@example.com"], "/orders/1": [200, "alice@example.com"] };
  const missing = { "/whoami": [401, "token-missing"], "/orders/1": [401, "token-missing"] };

  test("a tossed unprefixed cookie alone is no session", async () => {
    for (const [name, start] of frameworks) {
      for (const opts of [{ saml: SECURE }, { sessionCookie: "svc_session", sessionCookiePrefixedOnly: true }]) {
        const what = `${name} ${JSON.stringify(opts)}`;
        assert.deepEqual(await answers(start, opts, `svc_session=${tok()}`), missing, what);
        assert.deepEqual(await answers(start, opts, `__Host-svc_session=${tok()}`), admitted, what);
        assert.deepEqual(await answers(start, opts, `svc_session=a.b.c; __Host-svc_session=${tok()}`), admitted, what);
      }
    }
  });

  test("the unprefixed cookie is read on plain http on loopback, or when asked", async () => {
    for (const [name, start] of frameworks) {
      for (const opts of [{ saml: LOCAL }, { sessionCookie: "svc_session" },
        { saml: SECURE, sessionCookiePrefixedOnly: false }]) {
        assert.deepEqual(await answers(start, opts, `svc_session=${tok()}`), admitted, `${name} ${JSON.stringify(opts)}`);
      }
    }
  });

  // samlLoginRedirect with its defaults sends a browser whose only
  // session cookie is an unprefixed (tossed) one to sign in.
  async function wantTossedCookieSentToSignIn() {
    const a = express();
    a.use("/app", samlLoginRedirect());
    a.get("/app/page", (req, res) => res.json({}));
    const app = await serve(a);
    try {
      const r = await fetch(`${app.url}/app/page`, { headers: { accept: "text/html", cookie: "svc_session=a.b.c" }, redirect: "manual" });
      assert.equal(r.status, 302, "a tossed cookie is no session: sign in");
    } finally {
      await app.close();
    }
  }

  test("a bare sessionCookie follows the gateway's acsUrl of the environment", async () => {
    // As the Go and Python middlewares: the cookie's name alone, and
    // SVC_SAML_ACS_URL saying the gateway is Secure, is prefixed only.
    process.env.SVC_SAML_ACS_URL = SECURE.acsUrl;
    try {
      for (const [name, start] of frameworks) {
        const opts = { sessionCookie: "svc_session" };
        assert.deepEqual(await answers(start, opts, `svc_session=${tok()}`), missing, name);
        assert.deepEqual(await answers(start, opts, `__Host-svc_session=${tok()}`), admitted, name);
      }
      await wantTossedCookieSentToSignIn();
    } finally {
      delete process.env.SVC_SAML_ACS_URL;
    }
  });

  // Sets the variables of vars and runs f in a directory holding svc.toml
  // (none when toml is undefined), then restores both.
  async function withDeployment(vars, toml, f) {
    const cwd = process.cwd();
    const dir = mkdtempSync(join(tmpdir(), "svc-gateways-"));
    if (toml !== undefined) writeFileSync(join(dir, "svc.toml"), toml);
    Object.assign(process.env, vars);
    process.chdir(dir);
    try {
      await f();
    } finally {
      process.chdir(cwd);
      for (const k of Object.keys(vars)) delete process.env[k];
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const OIDC_ENV = { SVC_OIDC_ISSUER_URL: "https://idp.example", SVC_OIDC_REDIRECT_URL: "https://app.example/auth/oidc/callback" };
  const OIDC_TOML = '[sdk.oidc]\nissuer_url = "https://idp.example"\nredirect_url = "https://app.example/auth/oidc/callback"\n';

  test("behind an OpenID Connect gateway alone a tossed cookie is no session", async () => {
    // Its redirect_url is https: it sets only __Host-svc_session, whether
    // the environment or svc.toml says so, and whoever names the cookie.
    for (const [vars, toml] of [[OIDC_ENV, undefined], [{}, OIDC_TOML]]) {
      await withDeployment(vars, toml, async () => {
        for (const [name, start] of frameworks) {
          for (const opts of [{ sessionCookie: "svc_session" }, { saml: resolveSamlConfig() }]) {
            const what = `${name} ${JSON.stringify(vars)} ${toml} ${JSON.stringify(opts)}`;
            assert.deepEqual(await answers(start, opts, `svc_session=${tok()}`), missing, what);
            assert.deepEqual(await answers(start, opts, `__Host-svc_session=${tok()}`), admitted, what);
          }
        }
        await wantTossedCookieSentToSignIn();
      });
    }
  });

  test("a gateway on loopback http beside a Secure one keeps the unprefixed cookie", async () => {
    // Local development: that gateway sets unprefixed cookies.
    const toml = OIDC_TOML + '\n[[sdk.oidc.providers]]\nname = "dev"\ntenant = "t2"\nissuer_url = "http://127.0.0.1:9000"\n' +
      'redirect_url = "http://127.0.0.1:8080/auth/oidc/callback"\n';
    const mixedEnv = { SVC_SAML_ACS_URL: SECURE.acsUrl, SVC_OIDC_ISSUER_URL: "http://127.0.0.1:9000",
      SVC_OIDC_REDIRECT_URL: "http://localhost:8080/auth/oidc/callback" };
    for (const [vars, file] of [[mixedEnv, undefined], [{}, toml]]) {
      await withDeployment(vars, file, async () => {
        for (const [name, start] of frameworks) {
          assert.deepEqual(await answers(start, { sessionCookie: "svc_session" }, `svc_session=${tok()}`), admitted, name);
        }
      });
    }
  });

  test("samlLoginRedirect sends a browser with only a tossed cookie to sign in", async () => {
    const a = express();
    a.use("/app", samlLoginRedirect({ sessionCookiePrefixedOnly: sessionPrefixedOnly(SECURE) }));
    a.get("/app/page", (req, res) => res.json({}));
    const app = await serve(a);
    try {
      let r = await fetch(`${app.url}/app/page`, { headers: { accept: "text/html", cookie: "svc_session=a.b.c" }, redirect: "manual" });
      assert.equal(r.status, 302);
      assert.equal(r.headers.get("location"), "/auth/saml/login?return_to=%2Fapp%2Fpage");
      r = await fetch(`${app.url}/app/page`, { headers: { accept: "text/html", cookie: "__Host-svc_session=a.b.c" }, redirect: "manual" });
      assert.equal(r.status, 200);
    } finally {
      await app.close();
    }
  });
});

describe("browser flow through the application's origin", () => {
  let idp, sidecar, gateway, gatewayUrl, app, appUrl;
  const seen = [];
  const seenCookies = [];

  before(async () => {
    idp = await IdP.start();
    sidecar = await Sidecar.start(idp);
    // The gateway's ACS: a SAMLResponse "valid:<email>" is accepted and
    // becomes an RS256 token of the test IdP, anything else is refused
    // with the gateway's refusal body.
    gateway = createServer((req, res) => {
      let raw = "";
      req.on("data", (c) => (raw += c));
      req.on("end", () => {
        seen.push({ method: req.method, url: req.url, accept: req.headers.accept, type: req.headers["content-type"] });
        seenCookies.push(req.headers.cookie);
        const form = new URLSearchParams(raw);
        const assertion = form.get("SAMLResponse") ?? "";
        if (req.method !== "POST" || req.url !== "/auth/saml/acs") {
          res.writeHead(404).end();
          return;
        }
        if (!assertion.startsWith("valid:")) {
          res.writeHead(403, { "content-type": "application/json" })
            .end(JSON.stringify({ error: "saml-signature-invalid", message: "the assertion signature is invalid" }));
          return;
        }
        const exp = Math.floor(Date.now() / 1000) + 600;
        if (req.headers.cookie) {
          // As the gateway does for the last pending sign-on.
          res.setHeader("set-cookie", ["__Host-svc_session_req=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=None", "gw_other=1; Path=/"]);
        }
        const token = idp.token(claims({ sub: assertion.slice(6), email: assertion.slice(6), roles: ["viewer"], exp }));
        res.writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ token, token_type: "Bearer", expires_at: new Date(exp * 1000).toISOString() }));
      });
    });
    await new Promise((r) => gateway.listen(0, "127.0.0.1", r));
    gatewayUrl = `http://127.0.0.1:${gateway.address().port}`;

    const a = express();
    a.post("/auth/saml/acs", samlAcs({ gatewayUrl }));
    a.use("/app", samlLoginRedirect());
    a.use("/app", svcExpress({ client: new SvcClient({ sidecarUrl: sidecar.url, failMode: "closed", timeoutMs: CALL_TIMEOUT_MS }), sessionCookie: "svc_session" }));
    a.get("/app/page", (req, res) => res.json({ claims: req.svcClaims }));
    app = await serve(a);
    appUrl = app.url;
  });

  after(async () => {
    await app?.close();
    gateway?.close();
    await sidecar?.stop();
    idp?.close();
  });

  test("login redirect, ACS, cookie, authenticated request", async () => {
    // 1. Not signed in: redirected to the gateway's login with the return path.
    let r = await fetch(`${appUrl}/app/page?tab=2`, { redirect: "manual", headers: { accept: "text/html" } });
    assert.equal(r.status, 302);
    assert.equal(r.headers.get("location"), "/auth/saml/login?return_to=%2Fapp%2Fpage%3Ftab%3D2");

    // 2. The IdP posts the response to the ACS with the return path as RelayState.
    r = await fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ SAMLResponse: "valid:alice@example.com", RelayState: "/app/page?tab=2" }),
    });
    assert.equal(r.status, 303);
    assert.equal(r.headers.get("location"), "/app/page?tab=2");
    const [setCookie, ...others] = r.headers.getSetCookie();
    // The unprefixed cookie of an earlier sign-in is cleared.
    assert.deepEqual(others, ["svc_session=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Lax; Secure"]);
    assert.match(setCookie, /^__Host-svc_session=[\w-]+\.[\w-]+\.[\w-]+; Path=\/; Max-Age=\d+; Expires=.+; HttpOnly; SameSite=Lax; Secure$/);
    assert.ok(Number(/Max-Age=(\d+)/.exec(setCookie)[1]) > 500);
    assert.deepEqual(seen.at(-1), { method: "POST", url: "/auth/saml/acs", accept: "application/json",
      type: "application/x-www-form-urlencoded" });

    // 3. Back on the page with the cookie: the sidecar verifies the token.
    const cookie = setCookie.split(";")[0];
    r = await fetch(`${appUrl}/app/page?tab=2`, { headers: { cookie }, redirect: "manual" });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).claims.email, "alice@example.com");

    // Credentials the client chose to send are judged alone: Basic plus the
    // session cookie is no bearer (the sidecar and the Go and Python
    // middlewares agree).
    r = await fetch(`${appUrl}/app/page?tab=2`, { headers: { cookie, authorization: "Basic YTpi" }, redirect: "manual" });
    assert.equal(r.status, 401);
    assert.equal((await r.json()).reason, "token-missing");

    // A tampered cookie is refused by the sidecar.
    r = await fetch(`${appUrl}/app/page`, { headers: { cookie: cookie.slice(0, -4) + "AAAA" }, redirect: "manual" });
    assert.equal(r.status, 401);
    assert.equal((await r.json()).reason, "signature-invalid");
  });

  test("a tossed session cookie does not displace the __Host- one", async () => {
    let r = await fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ SAMLResponse: "valid:alice@example.com" }),
    });
    const host = r.headers.getSetCookie().find((c) => c.startsWith("__Host-svc_session="))?.split(";")[0];
    assert.ok(host, r.headers.getSetCookie().join("\n"));
    const token = host.slice(host.indexOf("=") + 1);
    for (const cookie of [`svc_session=a.b.c; ${host}`, `${host}; svc_session=a.b.c`]) {
      r = await fetch(`${appUrl}/app/page`, { headers: { cookie }, redirect: "manual" });
      assert.equal(r.status, 200, cookie);
      assert.equal((await r.json()).claims.email, "alice@example.com");
    }
    r = await fetch(`${appUrl}/app/page`, { headers: { cookie: `svc_session=${token}; __Host-svc_session=a.b.c` }, redirect: "manual" });
    assert.equal(r.status, 401);
    assert.equal((await r.json()).reason, "token-malformed");
  });

  test("the request cookie goes to the gateway under both names, and its update comes back", async () => {
    const r = await fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded",
        cookie: "theme=dark; svc_session_req=id-plain; __Host-svc_session_req=id-host.id-2; svc_session=old" },
      body: new URLSearchParams({ SAMLResponse: "valid:alice@example.com" }),
    });
    assert.equal(r.status, 303);
    // The gateway picks the name its own rule reads; nothing else goes.
    assert.equal(seenCookies.at(-1), "__Host-svc_session_req=id-host.id-2; svc_session_req=id-plain");
    const set = r.headers.getSetCookie();
    assert.ok(set.includes("__Host-svc_session_req=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=None"), set.join("\n"));
    assert.ok(!set.some((c) => c.startsWith("gw_other=")), set.join("\n"));
  });

  test("an open redirect in RelayState goes to /", async () => {
    const r = await fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ SAMLResponse: "valid:bob@example.com", RelayState: "https://evil.example.com/" }),
    });
    assert.equal(r.status, 303);
    assert.equal(r.headers.get("location"), "/");
  });

  test("refusals", async () => {
    let r = await fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ SAMLResponse: "forged" }),
    });
    assert.equal(r.status, 403);
    assert.equal(r.headers.get("set-cookie"), null);
    assert.deepEqual(await r.json(), { error: "saml-signature-invalid", message: "the assertion signature is invalid" });

    r = await fetch(`${appUrl}/auth/saml/acs`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error, "saml-malformed");

    r = await fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "a=" + "x".repeat((1 << 20) + 10),
    });
    assert.equal(r.status, 413);
  });

  test("exchangeAssertion", async () => {
    const t = await exchangeAssertion("valid:carol@example.com", { gatewayUrl });
    assert.equal(t.tokenType, "Bearer");
    assert.ok(t.expiresAt.getTime() > Date.now());
    const d = await new SvcClient({ sidecarUrl: sidecar.url, timeoutMs: CALL_TIMEOUT_MS }).validateToken(t.token);
    assert.deepEqual([d.allowed, d.claims.email], [true, "carol@example.com"]);

    await assert.rejects(exchangeAssertion("forged", { gatewayUrl }),
      (e) => e instanceof SamlError && e.status === 403 && e.code === "saml-signature-invalid");
    const down = `http://127.0.0.1:${(await import("./harness.mjs").then((h) => h.freeAddr())).split(":")[1]}`;
    await assert.rejects(exchangeAssertion("valid:x", { gatewayUrl: down }),
      (e) => e instanceof SamlError && e.status === 503 && e.code === "unavailable");
  });
});
