// The behaviour every framework's middleware must show. A framework's test
// passes start(client) returning { url, close } of an app with the routes:
//   GET /whoami                  validated only; answers {"claims": <request attribute>}
//   GET /orders/:id              requireAction("orders:read"); answers {"claims", "decision_id"}
//   GET /orders/:id/delete       requireAction("orders:delete")
//   GET /healthz                 excluded; answers {"claims": <request attribute>}
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { SvcClient } from "@svc/sdk";

import { apiKeys, blackHole, CALL_TIMEOUT_MS, claims, downUrl, KEY_SUBJECT, keyId, Sidecar, startSidecar,
  TENANT } from "./harness.mjs";

export function middlewareBehaviour(name, start) {
  describe(name, () => {
    let idp, sidecar, client, stop;
    before(async () => ({ idp, sidecar, client, stop } = await startSidecar()));
    after(() => stop?.());

    // token is sent as a bearer token, headers as they are.
    async function call(c, path, token, headers = {}) {
      const app = await start(c);
      try {
        const res = await fetch(app.url + path,
          { headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers } });
        return { status: res.status, headers: res.headers, body: await res.json() };
      } finally {
        await app.close();
      }
    }
    const tok = (over) => idp.token(claims(over));
    // The refusal body: exactly the fields every svc middleware (TypeScript,
    // Python, Go) answers with, as JSON.
    function refusal(r, what) {
      assert.match(r.headers.get("content-type") ?? "", /^application\/json/, what);
      assert.equal(r.headers.get("cache-control"), "no-store", what);
      assert.equal(r.headers.get("x-content-type-options"), "nosniff", what);
      const keys = Object.keys(r.body).sort();
      const want = ["allow", "deny_reasons", "reason"];
      if ("decision_id" in r.body) want.push("decision_id");
      assert.deepEqual(keys, want.sort(), `${what}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.allow, false, what);
      assert.ok(Array.isArray(r.body.deny_reasons), what);
      return r.body;
    }

    test("valid token: claims on the request", async () => {
      const r = await call(client, "/whoami", tok({ email: "alice@example.com" }));
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.claims.sub, "alice");
      assert.equal(r.body.claims.tenant_id, TENANT);
      assert.equal(r.body.claims.email, "alice@example.com");
    });

    test("refusals", async () => {
      const now = Math.floor(Date.now() / 1000);
      const invalid = (reason) => `Bearer error="invalid_token", error_description="${reason}"`;
      const cases = [
        ["no token", "/whoami", null, 401, "token-missing", "Bearer"],
        ["expired", "/whoami", tok({ iat: now - 600, exp: now - 300 }), 401, "token-expired", invalid("token-expired")],
        ["malformed", "/whoami", "abc", 401, "token-malformed", invalid("token-malformed")],
        ["action without token", "/orders/1", null, 401, "token-missing", "Bearer"],
        ["action, expired", "/orders/1", tok({ exp: now - 300 }), 401, "token-expired", invalid("token-expired")],
      ];
      // A reachable sidecar refuses an invalid token whatever the mode.
      for (const failMode of ["open", "closed"]) {
        const c = new SvcClient({ sidecarUrl: sidecar.url, failMode, timeoutMs: CALL_TIMEOUT_MS });
        for (const [what, path, token, status, reason, challenge] of cases) {
          const r = await call(c, path, token);
          assert.equal(r.status, status, `${what}, ${failMode}`);
          assert.equal(r.headers.get("www-authenticate"), challenge, `${what}, ${failMode}`);
          const b = refusal(r, `${what}, ${failMode}`);
          assert.deepEqual([b.deny_reasons, b.reason], [[], reason], `${what}, ${failMode}`);
        }
      }
    });

    test("requireAction", async () => {
      for (const failMode of ["open", "closed"]) {
        const c = new SvcClient({ sidecarUrl: sidecar.url, failMode, timeoutMs: CALL_TIMEOUT_MS });
        const viewer = tok({ roles: ["viewer"] });
        let r = await call(c, "/orders/7", viewer);
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.claims.sub, "alice");
        assert.ok(r.body.decision_id);

        r = await call(c, "/orders/7/delete", viewer);
        assert.equal(r.status, 403, failMode);
        assert.equal(r.headers.get("www-authenticate"), null);
        const b = refusal(r, `policy deny, ${failMode}`);
        assert.equal(b.reason, "policy-deny");
        assert.deepEqual(b.deny_reasons, ["role-forbidden: viewer cannot orders:delete"]);
        assert.ok(b.decision_id);

        r = await call(c, "/orders/7/delete", tok({ roles: ["admin"] }));
        assert.equal(r.status, 200, failMode);
      }
    });

    test("token of another tenant is forbidden", async () => {
      for (const path of ["/whoami", "/orders/7"]) {
        const r = await call(client, path, tok({ tenant_id: "globex" }));
        assert.equal(r.status, 403, path);
        assert.equal(r.headers.get("www-authenticate"), null, path);
        assert.ok([r.body.reason, ...r.body.deny_reasons].includes("tenant-mismatch"), JSON.stringify(r.body));
      }
    });

    test("API keys", async () => {
      // Read as the sidecar's checks read them: "Authorization: ApiKey",
      // else X-Api-Key when there is no Authorization header at all.
      const keys = await apiKeys(idp);
      try {
        const invalid = (reason) => `ApiKey error="invalid_key", error_description="${reason}"`;
        const cases = [
          ["X-Api-Key", "/whoami", { "x-api-key": keys.viewer }, 200],
          ["X-Api-Key, action", "/orders/7", { "x-api-key": ` ${keys.viewer} ` }, 200],
          ["ApiKey scheme", "/whoami", { authorization: `apikey ${keys.viewer}` }, 200],
          ["ApiKey scheme, action", "/orders/7", { authorization: `ApiKey\t${keys.viewer}` }, 200],
          ["ApiKey scheme beside another X-Api-Key", "/whoami",
            { authorization: `ApiKey ${keys.viewer}`, "x-api-key": keys.revoked }, 200],
          ["viewer key deletes", "/orders/7/delete", { "x-api-key": keys.viewer }, 403, "policy-deny", null],
          ["revoked", "/whoami", { "x-api-key": keys.revoked }, 401, "api-key-revoked", invalid("api-key-revoked")],
          ["revoked, action", "/orders/7", { authorization: `ApiKey ${keys.revoked}` }, 401, "api-key-revoked",
            invalid("api-key-revoked")],
          ["unknown", "/whoami", { authorization: `ApiKey ${keys.unknown}` }, 401, "api-key-unknown",
            invalid("api-key-unknown")],
          ["unknown, action", "/orders/7", { "x-api-key": keys.unknown }, 401, "api-key-unknown",
            invalid("api-key-unknown")],
          ["expired", "/whoami", { "x-api-key": keys.expired }, 401, "api-key-expired", invalid("api-key-expired")],
          ["malformed", "/orders/7", { "x-api-key": "svck_short" }, 401, "api-key-malformed",
            invalid("api-key-malformed")],
          // A bearer scheme decides: X-Api-Key beside it is not read.
          ["bearer beside X-Api-Key", "/whoami", { authorization: "Bearer junk", "x-api-key": keys.viewer }, 401,
            "token-malformed", 'Bearer error="invalid_token", error_description="token-malformed"'],
          ["another scheme beside X-Api-Key", "/orders/7", { authorization: "Basic YTpi", "x-api-key": keys.viewer },
            401, "token-missing", "Bearer"],
          ["empty X-Api-Key", "/whoami", { "x-api-key": " " }, 401, "token-missing", "Bearer"],
        ];
        for (const failMode of ["open", "closed"]) {
          const c = new SvcClient({ sidecarUrl: keys.sidecar.url, failMode, timeoutMs: CALL_TIMEOUT_MS });
          for (const [what, path, headers, status, reason, challenge] of cases) {
            const r = await call(c, path, null, headers);
            const at = `${what}, ${failMode}: ${JSON.stringify(r.body)}`;
            assert.equal(r.status, status, at);
            if (status === 200) {
              assert.equal(r.headers.get("www-authenticate"), null, at);
              assert.deepEqual([r.body.claims.sub, r.body.claims.tenant_id, r.body.claims.api_key_id],
                [KEY_SUBJECT, TENANT, keyId(keys.viewer)], at);
              continue;
            }
            assert.equal(r.headers.get("www-authenticate"), challenge, at);
            assert.equal(refusal(r, at).reason, reason, at);
          }
        }
        // The sidecar takes the IdP's bearer tokens beside keys: a token
        // decides over an X-Api-Key beside it.
        const c = new SvcClient({ sidecarUrl: keys.sidecar.url, failMode: "closed", timeoutMs: CALL_TIMEOUT_MS });
        const r = await call(c, "/whoami", tok(), { "x-api-key": keys.revoked });
        assert.deepEqual([r.status, r.body.claims?.sub], [200, "alice"], JSON.stringify(r.body));
      } finally {
        await keys.sidecar.stop();
      }
    });

    test("excluded path", async () => {
      const r = await call(client, "/healthz", null);
      assert.deepEqual([r.status, r.body], [200, { claims: null }]);
    });

    test("fail modes: sidecar down or timing out", async () => {
      const hole = await blackHole();
      const quiet = { warn: () => {} };
      try {
        const targets = [["down", await downUrl(), undefined], ["timing out", hole.url, 300]];
        for (const [what, sidecarUrl, timeoutMs] of targets) {
          for (const path of ["/whoami", "/orders/1"]) {
            let r = await call(new SvcClient({ sidecarUrl, failMode: "open", timeoutMs, ...quiet }), path, tok());
            assert.deepEqual([r.status, r.body.claims], [200, null], `${what}, open, ${path}`);
            r = await call(new SvcClient({ sidecarUrl, failMode: "closed", timeoutMs }), path, tok());
            assert.deepEqual([r.status, refusal(r, what).reason], [503, "unavailable"], `${what}, closed, ${path}`);
            r = await call(new SvcClient({ sidecarUrl, failMode: "open", timeoutMs, ...quiet }), path, null);
            assert.equal(r.status, 401, `${what}, open, no token, ${path}`);
          }
        }
      } finally {
        hole.close();
      }
    });

    test("fail modes: the running sidecar stops", async () => {
      // A real sidecar that answered, then went down: the clients hold
      // pooled connections to it when it stops.
      const sc = await Sidecar.start(idp);
      try {
        const clients = {
          open: new SvcClient({ sidecarUrl: sc.url, failMode: "open", timeoutMs: CALL_TIMEOUT_MS, warn: () => {} }),
          closed: new SvcClient({ sidecarUrl: sc.url, failMode: "closed", timeoutMs: CALL_TIMEOUT_MS }),
        };
        const paths = ["/whoami", "/orders/1"];
        for (const [mode, c] of Object.entries(clients)) {
          for (const path of paths) {
            const r = await call(c, path, tok());
            assert.deepEqual([r.status, r.body.claims?.sub], [200, "alice"], `up, ${mode}, ${path}`);
          }
        }
        await sc.stop();
        for (const path of paths) {
          let r = await call(clients.open, path, tok());
          assert.deepEqual([r.status, r.body.claims], [200, null], `stopped, open, ${path}`);
          r = await call(clients.closed, path, tok());
          assert.equal(r.status, 503, `stopped, closed, ${path}`);
          assert.equal(refusal(r, `stopped, closed, ${path}`).reason, "unavailable");
          assert.equal(r.headers.get("www-authenticate"), null);
        }
      } finally {
        await sc.stop();
      }
    });
  });
}
