// The fail-open notice, the timeout (a slow sidecar is unreachable only
// once the whole timeout has passed) and the Secure session cookie.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";

import { FAIL_OPEN_NOTICE, MAX_TIMEOUT_MS, SidecarUnavailableError, SvcClient } from "@svc/sdk";
import { loopbackHost, samlAcs } from "@svc/sdk/saml";

import { fullBacklog } from "./harness.mjs";

/** An HTTP server answering every POST with an allowed decision after delayMs. */
async function slowSidecar(delayMs) {
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ allowed: true, reason: "ok", subject: "alice", claims: { sub: "alice" } }));
      }, delayMs);
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    close() {
      srv.closeAllConnections();
      srv.close();
    },
  };
}

const noEnv = { env: {}, configFile: null };

describe("fail-open notice", () => {
  test("a fail-open client says so once, when it is made", async () => {
    const s = await slowSidecar(0);
    try {
      for (const opts of [{ failMode: "open" }, {}]) {
        const warnings = [];
        const c = new SvcClient({ ...noEnv, ...opts, sidecarUrl: s.url, timeoutMs: 30_000, warn: (m) => warnings.push(m) });
        assert.equal(c.failMode, "open");
        assert.equal(warnings.length, 1, warnings.join("\n"));
        assert.ok(warnings[0].startsWith(FAIL_OPEN_NOTICE), warnings[0]);
        assert.match(warnings[0], /requests are allowed when the sidecar is unreachable/);
        assert.match(warnings[0], /SVC_FAIL_MODE=closed/);
        assert.match(warnings[0], opts.failMode ? /from failMode/ : /by default/);
        await c.validateToken("t");
        await c.authorize("t", "orders:read");
        assert.equal(warnings.length, 1, "calls do not repeat it");
      }
    } finally {
      s.close();
    }
  });

  test("a fail-closed client is silent", () => {
    for (const opts of [{ failMode: "closed" }, { env: { SVC_FAIL_MODE: "closed" } }]) {
      const warnings = [];
      new SvcClient({ ...noEnv, ...opts, sidecarUrl: "http://127.0.0.1:1", warn: (m) => warnings.push(m) });
      assert.deepEqual(warnings, []);
    }
  });
});

describe("timeout", () => {
  const TIMEOUT = 1000;
  const MARGIN = 350;
  // Timers may fire a millisecond before the clock read here says.
  const SLACK = 20;

  test("an answer a little before the timeout is the sidecar's decision", async () => {
    const s = await slowSidecar(TIMEOUT - MARGIN);
    try {
      for (const failMode of ["open", "closed"]) {
        const c = new SvcClient({ ...noEnv, sidecarUrl: s.url, failMode, timeoutMs: TIMEOUT, warn: () => {} });
        const d = await c.validateToken("t");
        assert.deepEqual([d.allowed, d.reason, d.subject], [true, "ok", "alice"], failMode);
        assert.equal((await c.authorize("t", "orders:read")).reason, "ok");
      }
    } finally {
      s.close();
    }
  });

  test("an answer a little after the timeout: the fail mode, not before the timeout", async () => {
    const s = await slowSidecar(TIMEOUT + MARGIN);
    try {
      const open = new SvcClient({ ...noEnv, sidecarUrl: s.url, failMode: "open", timeoutMs: TIMEOUT, warn: () => {} });
      let start = performance.now();
      const d = await open.validateToken("t");
      assert.ok(performance.now() - start >= TIMEOUT - SLACK, `fail-open after ${performance.now() - start} ms`);
      assert.deepEqual([d.allowed, d.reason, d.claims], [true, "fail-open", null]);

      const closed = new SvcClient({ ...noEnv, sidecarUrl: s.url, failMode: "closed", timeoutMs: TIMEOUT });
      start = performance.now();
      await assert.rejects(closed.validateToken("t"), SidecarUnavailableError);
      assert.ok(performance.now() - start >= TIMEOUT - SLACK, `unavailable after ${performance.now() - start} ms`);
    } finally {
      s.close();
    }
  });

  test("a connection not accepted is unreachable only after a timeout longer than fetch's own 10 s", async () => {
    const timeoutMs = 12_000;
    const hole = await fullBacklog();
    try {
      const c = new SvcClient({ ...noEnv, sidecarUrl: hole.url, failMode: "closed", timeoutMs });
      const start = performance.now();
      await assert.rejects(c.validateToken("t"), SidecarUnavailableError);
      const took = performance.now() - start;
      assert.ok(took >= timeoutMs - SLACK, `unreachable after ${Math.round(took)} ms, before the ${timeoutMs} ms timeout`);
    } finally {
      hole.close();
    }
  });

  test("a timeout beyond what fetch can wait is refused", () => {
    assert.throws(() => new SvcClient({ ...noEnv, failMode: "closed", timeoutMs: MAX_TIMEOUT_MS + 1 }), /timeoutMs/);
    new SvcClient({ ...noEnv, failMode: "closed", timeoutMs: MAX_TIMEOUT_MS });
  });
});

describe("SAML session cookie", () => {
  let gateway, gatewayUrl;

  before(async () => {
    gateway = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
          token: "aaa.bbb.ccc", token_type: "Bearer", expires_at: new Date(Date.now() + 600_000).toISOString(),
        }));
      });
    });
    await new Promise((r) => gateway.listen(0, "127.0.0.1", r));
    gatewayUrl = `http://127.0.0.1:${gateway.address().port}`;
  });

  after(() => gateway?.close());

  /** The Set-Cookie samlAcs answers a request to host (over plain http, as behind a TLS-terminating proxy). */
  async function cookieFor(host, opts = {}) {
    const req = {
      headers: { host, "content-type": "application/x-www-form-urlencoded" },
      secure: false,
      body: { SAMLResponse: "valid", RelayState: "/app" },
      async *[Symbol.asyncIterator]() {},
    };
    const got = { cookies: [] };
    const res = {
      status(c) { got.status = c; return this; },
      set() { return this; },
      json(b) { got.json = b; },
      redirect(s, u) { got.redirect = [s, u]; },
      append(f, v) { if (f === "Set-Cookie") got.cookies.push(v); return this; },
    };
    let failed;
    await samlAcs({ gatewayUrl, ...opts })(req, res, (e) => (failed = e));
    assert.equal(failed, undefined);
    assert.deepEqual(got.redirect, [303, "/app"], JSON.stringify(got));
    // A Secure session cookie is __Host- prefixed, and the plain name of
    // an earlier sign-in is cleared; without Secure the plain name alone.
    const [session, ...rest] = got.cookies;
    if (/; Secure$/.test(session)) {
      assert.match(session, /^__Host-svc_session=aaa\.bbb\.ccc; Path=\/;/, host);
      assert.deepEqual(rest.map((c) => c.split(";")[0]), ["svc_session="], String(host));
    } else {
      assert.match(session, /^svc_session=aaa\.bbb\.ccc;/, host);
      assert.equal(rest.length, 0);
    }
    return session;
  }

  test("Secure by default, also when the request came over plain http", async () => {
    for (const host of ["shop.example", "shop.example:8080", "localhost:3000", "127.0.0.1"]) {
      assert.match(await cookieFor(host), /; Secure$/, host);
    }
  });

  test("secure: false leaves Secure out on loopback only", async () => {
    for (const host of ["localhost:3000", "LOCALHOST", "127.0.0.1:8080", "127.1.2.3", "[::1]:3000"]) {
      assert.doesNotMatch(await cookieFor(host, { secure: false }), /Secure/, host);
    }
    for (const host of ["shop.example", "localhost.evil.example", "10.0.0.1:3000", "[::ffff:10.0.0.1]", "", undefined]) {
      assert.match(await cookieFor(host, { secure: false }), /; Secure$/, String(host));
    }
  });

  test("loopbackHost", () => {
    const yes = ["localhost", "localhost:1", "127.0.0.1", "127.255.255.255:80", "[::1]", "[::1]:7700", "::1"];
    const no = ["127.0.0.256", "128.0.0.1", "localhost.example", "[::2]", "example.com:80", "", undefined, ["localhost"]];
    for (const h of yes) assert.equal(loopbackHost(h), true, String(h));
    for (const h of no) assert.equal(loopbackHost(h), false, String(h));
  });
});
