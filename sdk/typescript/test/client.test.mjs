// SvcClient against the real sidecar, a sidecar that is down and one that
// never answers.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { SidecarRequestError, SidecarUnavailableError, SvcClient } from "@svc/sdk";

import { checkAction } from "../dist/web.js";

import { blackHole, CALL_TIMEOUT_MS, claims, downUrl, newKey, relay, serve, Sidecar, startSidecar, TENANT } from "./harness.mjs";

const quiet = { warn: () => {} };

describe("configuration", () => {
  test("defaults, environment, options", () => {
    const cases = [
      ["no environment", {}, {}, "http://localhost:7700", "open"],
      ["environment", { SVC_SIDECAR_URL: "http://127.0.0.1:9", SVC_FAIL_MODE: "closed" }, {}, "http://127.0.0.1:9", "closed"],
      ["options win", { SVC_SIDECAR_URL: "http://127.0.0.1:9", SVC_FAIL_MODE: "closed" },
        { sidecarUrl: "http://[::1]:7700", failMode: "open" }, "http://[::1]:7700", "open"],
    ];
    for (const [name, env, opts, url, mode] of cases) {
      const c = new SvcClient({ env, ...opts });
      assert.deepEqual([c.sidecarUrl, c.failMode, c.timeoutMs], [url, mode, 1000], name);
    }
  });

  test("process environment", () => {
    const old = { u: process.env.SVC_SIDECAR_URL, m: process.env.SVC_FAIL_MODE };
    process.env.SVC_SIDECAR_URL = "http://127.0.0.1:7799";
    process.env.SVC_FAIL_MODE = "closed";
    try {
      const c = new SvcClient();
      assert.deepEqual([c.sidecarUrl, c.failMode], ["http://127.0.0.1:7799", "closed"]);
    } finally {
      for (const [k, v] of [["SVC_SIDECAR_URL", old.u], ["SVC_FAIL_MODE", old.m]]) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  test("bad configuration is refused", () => {
    const cases = [
      ["unknown fail mode", {}, { failMode: "sometimes" }, /\(failMode\)/],
      ["unknown SVC_FAIL_MODE", { SVC_FAIL_MODE: "sometimes" }, {}, /\(SVC_FAIL_MODE\)/],
      ["not a URL", {}, { sidecarUrl: "[::1]:50051" }, /\(sidecarUrl\)/],
      ["grpc scheme", {}, { sidecarUrl: "grpc://localhost:50051" }, /\(sidecarUrl\)/],
      ["SVC_SIDECAR_URL not a URL", { SVC_SIDECAR_URL: "[::1]:50051" }, {}, /\(SVC_SIDECAR_URL\)/],
      ["SVC_SIDECAR_ADDR URL without a host", { SVC_SIDECAR_ADDR: "http://" }, {}, /\(SVC_SIDECAR_ADDR\)/],
      ["zero timeout", {}, { timeoutMs: 0 }, /timeoutMs/],
    ];
    for (const [name, env, opts, re] of cases) {
      assert.throws(() => new SvcClient({ env, configFile: null, ...opts }), re, name);
    }
  });
});

describe("against the sidecar", () => {
  let idp, sidecar, client, stop;
  before(async () => ({ idp, sidecar, client, stop } = await startSidecar()));
  after(() => stop?.());

  test("validateToken", async () => {
    const now = Math.floor(Date.now() / 1000);
    const other = newKey().privateKey;
    const noTenant = claims();
    delete noTenant.tenant_id;
    const cases = [
      ["valid", idp.token(claims({ dept: "eng" })), true, "ok"],
      ["expired", idp.token(claims({ iat: now - 600, exp: now - 300 })), false, "token-expired"],
      ["wrong signature", idp.token(claims(), other), false, "signature-invalid"],
      ["no tenant", idp.token(noTenant), false, "tenant-missing"],
      ["garbage", "not-a-jwt", false, "token-malformed"],
      ["empty", "", false, "token-missing"],
    ];
    for (const [name, tok, allowed, reason] of cases) {
      const d = await client.validateToken(tok);
      assert.deepEqual([d.allowed, d.reason], [allowed, reason], name);
      assert.match(d.decisionId, /^[0-9a-f-]{36}$/, `${name}: every answer has its decision id`);
      if (allowed) {
        assert.equal(d.claims.sub, "alice", name);
        assert.equal(d.claims.tenant_id, TENANT, name);
        assert.equal(d.claims.dept, "eng", name);
        assert.equal(d.subject, "alice", name);
      } else {
        assert.equal(d.claims, null, name);
      }
    }
  });

  test("authorize", async () => {
    const viewer = idp.token(claims({ roles: ["viewer"] }));
    const cases = [
      ["allowed", viewer, "orders:read", {}, true, "policy-allow", []],
      ["role forbids", viewer, "orders:delete", { resourceId: "42" }, false, "policy-deny",
        ["role-forbidden: viewer cannot orders:delete"]],
      ["other tenant's resource", viewer, "orders:read", { resourceTenant: "globex" }, false, "policy-deny",
        ["tenant-mismatch"]],
      ["expired token", idp.token(claims({ exp: Math.floor(Date.now() / 1000) - 300 })), "orders:read", {}, false,
        "token-expired", []],
    ];
    for (const [name, tok, action, opts, allow, reason, deny] of cases) {
      const d = await client.authorize(tok, action, opts);
      assert.deepEqual([d.allow, d.reason, d.denyReasons], [allow, reason, deny], name);
      if (reason.startsWith("policy-")) {
        assert.ok(d.decisionId, name);
        assert.equal(d.claims.sub, "alice", name);
      }
    }
  });

  test("a malformed request is an error, not a decision", async () => {
    for (const failMode of ["open", "closed"]) {
      const c = new SvcClient({ sidecarUrl: sidecar.url, failMode, timeoutMs: CALL_TIMEOUT_MS });
      await assert.rejects(c.authorize(idp.token(claims()), ""),
        (e) => e instanceof SidecarRequestError && e.reason === "input-invalid");
    }
  });

  test("connections are kept alive and reused", async () => {
    const r = await relay(sidecar.httpAddr);
    try {
      const c = new SvcClient({ sidecarUrl: r.url, failMode: "closed", timeoutMs: CALL_TIMEOUT_MS });
      const tok = idp.token(claims());
      for (let i = 0; i < 20; i++) assert.equal((await c.validateToken(tok)).allowed, true);
      // Node's fetch (undici) may open a second connection early on; it
      // never opens one per call.
      const pooled = r.accepted;
      assert.ok(pooled >= 1 && pooled <= 2, `${pooled} connections for 20 calls`);
      for (let i = 0; i < 20; i++) assert.equal((await c.validateToken(tok)).allowed, true);
      assert.equal(r.accepted, pooled, "no new connection once warm");
      await r.dropAll();
      assert.equal((await c.validateToken(tok)).allowed, true, "reconnects after the server closed them");
      assert.equal(r.accepted, pooled + 1);
    } finally {
      await r.close();
    }
  });

  test("a rate-limited tenant: decision with retryAfter, 429 with Retry-After", async () => {
    const sc = await Sidecar.start(idp, { SVC_RATE_LIMIT_DEFAULT_RPM: "1" });
    try {
      const c = new SvcClient({ sidecarUrl: sc.url, failMode: "closed", timeoutMs: CALL_TIMEOUT_MS });
      const tok = idp.token(claims());
      assert.equal((await c.authorize(tok, "orders:read")).allow, true);
      const d = await c.authorize(tok, "orders:read");
      assert.deepEqual([d.allow, d.reason], [false, "rate-limited"]);
      assert.ok(d.retryAfter > 0, String(d.retryAfter));
      const out = await checkAction(c, tok, "orders:read");
      assert.equal(out.admitted, false);
      assert.equal(out.refusal.status, 429);
      assert.ok(Number(out.refusal.headers["retry-after"]) >= 1);
    } finally {
      await sc.stop();
    }
  });

  test("a policy reads input.resource.attributes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "policy-"));
    writeFileSync(join(dir, "authz.rego"),
      "package svc.authz\n\ndefault allow := false\n\nallow if input.resource.attributes.owner == input.user.id\n\n" +
      "deny_reasons := set() if allow\nelse := {\"not-owner\"}\n");
    const sc = await Sidecar.start(idp, { SVC_POLICY_DIR: dir });
    try {
      const c = new SvcClient({ sidecarUrl: sc.url, failMode: "closed", timeoutMs: CALL_TIMEOUT_MS, ...quiet });
      const tok = idp.token(claims({ sub: "alice" }));
      const attrs = { owner: "alice", status: "open", tags: ["a", 1], meta: { region: "eu" } };
      const owner = await c.authorize(tok, "orders:update", { resourceId: "o-1", resourceAttributes: attrs });
      assert.deepEqual([owner.allow, owner.reason], [true, "policy-allow"]);
      const other = await c.authorize(tok, "orders:update", { resourceId: "o-1", resourceAttributes: { ...attrs, owner: "bob" } });
      assert.deepEqual([other.allow, other.denyReasons], [false, ["not-owner"]]);
      assert.equal((await c.authorize(tok, "orders:update", { resourceId: "o-1" })).allow, false);
      await assert.rejects(c.authorize(tok, "orders:update", { resourceAttributes: { ["k".repeat(129)]: 1 } }),
        (e) => e instanceof SidecarRequestError && e.reason === "input-invalid");
    } finally {
      await sc.stop();
    }
  });

  test("a sidecar that cannot decide (500 policy-error) is refused in both fail modes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "policy-"));
    writeFileSync(join(dir, "authz.rego"),
      "package svc.authz\n\nallow := true if input.action\n\nallow := false if input.action\n\ndeny_reasons := set()\n");
    const sc = await Sidecar.start(idp, { SVC_POLICY_DIR: dir });
    try {
      const tok = idp.token(claims());
      for (const failMode of ["open", "closed"]) {
        const c = new SvcClient({ sidecarUrl: sc.url, failMode, timeoutMs: CALL_TIMEOUT_MS, ...quiet });
        await assert.rejects(c.authorize(tok, "orders:read"),
          (e) => e instanceof SidecarUnavailableError && e.reason === "policy-error", failMode);
        const out = await checkAction(c, tok, "orders:read");
        assert.deepEqual([out.admitted, out.refusal?.status, out.refusal?.body.reason], [false, 503, "policy-error"], failMode);
      }
    } finally {
      await sc.stop();
    }
  });
});

describe("an answer that is not the sidecar's", () => {
  test("a redirect is not followed: the token never leaves, the decision is never another server's", async () => {
    const seen = [];
    const other = await serve((req, res) => {
      seen.push(req.url);
      req.resume();
      req.on("end", () => res.writeHead(200, { "content-type": "application/json" })
        .end('{"allowed":true,"reason":"ok","subject":"root","claims":{"sub":"root"}}'));
    });
    const redirecting = await serve((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(307, { location: other.url + req.url }).end());
    });
    try {
      for (const failMode of ["open", "closed"]) {
        const c = new SvcClient({ sidecarUrl: redirecting.url, failMode, timeoutMs: CALL_TIMEOUT_MS, ...quiet });
        await assert.rejects(c.validateToken("tok"), SidecarRequestError, failMode);
        await assert.rejects(c.authorize("tok", "orders:read"), SidecarRequestError, failMode);
        const out = await checkAction(c, "tok", "orders:read");
        assert.deepEqual([out.admitted, out.refusal?.status], [false, 500], failMode);
      }
      assert.deepEqual(seen, [], "the redirect's target was asked");
    } finally {
      await other.close();
      await redirecting.close();
    }
  });
});

describe("unavailable sidecar", () => {
  async function check(url, timeoutMs) {
    const warnings = [];
    const open = new SvcClient({ sidecarUrl: url, failMode: "open", timeoutMs, warn: (m) => warnings.push(m) });
    assert.deepEqual(await open.validateToken("any"), {
      allowed: true, claims: null, reason: "fail-open", subject: "anonymous", tenantId: "",
      message: "sidecar unavailable; allowed by fail_mode=open", decisionId: "",
    });
    const a = await open.authorize("any", "orders:read");
    assert.deepEqual([a.allow, a.claims, a.reason, a.denyReasons], [true, null, "fail-open", []]);
    assert.equal(warnings.length, 2, "the notice at construction, then one warning per 10 s");
    assert.match(warnings[0], /requests are allowed when the sidecar is unreachable/);
    assert.match(warnings[1], /sidecar unavailable; allowing by fail_mode=open/);

    const closed = new SvcClient({ sidecarUrl: url, failMode: "closed", timeoutMs });
    await assert.rejects(closed.validateToken("any"),
      (e) => e instanceof SidecarUnavailableError && e.reason === "unavailable" && e.message.includes(url));
    await assert.rejects(closed.authorize("any", "orders:read"), SidecarUnavailableError);
  }

  test("down", async () => {
    await check(await downUrl());
  });

  test("times out", async () => {
    const hole = await blackHole();
    try {
      const start = Date.now();
      await check(hole.url, 300);
      // A hung call would never return; the margin is for a loaded machine.
      assert.ok(Date.now() - start < 4 * 300 + 20_000, "each call bounded by the timeout");
    } finally {
      hole.close();
    }
  });
});
