// @svc/sdk/identity against the real sidecar: the X-Svc-Identity token of
// an allowed check verifies against the sidecar's /.well-known/jwks.json,
// and the Express middleware admits on it alone.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import express from "express";

import { IdentityError, IdentityVerifier, svcIdentityExpress } from "@svc/sdk/identity";

import { claims, IdP, serve, Sidecar } from "./harness.mjs";

/** The X-Svc-Identity of an allowed nginx-style check of bearer for host. */
async function identityOf(sc, bearer, host) {
  const r = await fetch(`${sc.url}/check`, {
    headers: {
      authorization: `Bearer ${bearer}`, "x-original-uri": "/orders/1", x_svc_method: "GET", "x-forwarded-host": host,
    },
  });
  assert.equal(r.status, 200, await r.text());
  return r.headers.get("x-svc-identity");
}

describe("identity tokens", () => {
  let idp, sc, other, app, url, verifier, keyDir;

  before(async () => {
    idp = await IdP.start();
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    keyDir = mkdtempSync(join(tmpdir(), "svc-identity-"));
    const keyFile = join(keyDir, "key.pem");
    writeFileSync(keyFile, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
    sc = await Sidecar.start(idp, { SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE: keyFile });
    const otherKey = join(keyDir, "other.pem");
    writeFileSync(otherKey, generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }));
    other = await Sidecar.start(idp, { SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE: otherKey });
    verifier = new IdentityVerifier({ jwksUrl: `${sc.url}/.well-known/jwks.json`, audience: "orders.internal", issuer: "svc-sidecar" });
    const a = express();
    a.use(svcIdentityExpress({ verifier }));
    a.get("/whoami", (req, res) => res.json({ claims: req.svcClaims }));
    app = await serve(a);
    url = app.url;
  });

  after(async () => {
    await app?.close();
    await sc?.stop();
    await other?.stop();
    idp?.close();
    if (keyDir) rmSync(keyDir, { recursive: true, force: true });
  });

  test("the sidecar's token verifies and names the caller", async () => {
    const tok = await identityOf(sc, idp.token(claims()), "orders.internal");
    const c = await verifier.verify(tok);
    assert.equal(c.sub, "alice");
    assert.equal(c.tenant_id, "acme");
    assert.deepEqual(c.roles, ["viewer"]);
    assert.equal(c.aud, "orders.internal");
    assert.ok(c.decision_id);
  });

  test("the middleware admits on the token alone and refuses the rest", async () => {
    const good = await identityOf(sc, idp.token(claims()), "orders.internal");
    const cases = [
      ["valid", good, 200, null],
      ["missing", undefined, 401, "token-missing"],
      ["another sidecar's key", await identityOf(other, idp.token(claims()), "orders.internal"), 401, "signature-invalid"],
      ["for another service", await identityOf(sc, idp.token(claims({ sub: "bob" })), "billing.internal"), 401, "audience-mismatch"],
      ["garbage", "a.b.c", 401, "token-malformed"],
    ];
    for (const [name, tok, status, reason] of cases) {
      const r = await fetch(`${url}/whoami`, { headers: tok ? { "x-svc-identity": tok } : {} });
      const body = await r.json();
      assert.equal(r.status, status, `${name}: ${JSON.stringify(body)}`);
      if (status === 200) assert.equal(body.claims.sub, "alice", name);
      else assert.equal(body.reason, reason, name);
    }
  });

  test("no key set is jwks-unavailable", async () => {
    const v = new IdentityVerifier({ jwksUrl: "http://127.0.0.1:1/.well-known/jwks.json" });
    await assert.rejects(v.verify("a.b.c"), (e) => e instanceof IdentityError);
    const tok = await identityOf(sc, idp.token(claims()), "orders.internal");
    await assert.rejects(v.verify(tok), (e) => e instanceof IdentityError && e.reason === "jwks-unavailable");
  });
});
