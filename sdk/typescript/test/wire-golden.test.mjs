// The SDK's types read the local API's JSON shapes as the sidecar writes
// them. The golden files are the Go wire package's (wire/testdata),
// which the Go tests marshal from the sidecar's own types: a field renamed on
// either side fails here.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { test } from "node:test";

import { SidecarRequestError, SvcClient } from "@svc/sdk";

import { API_KEY_FAILURES, TOKEN_FAILURES, refusalOf } from "../dist/web.js";

import { REPO } from "./harness.mjs";

const GOLDEN = join(REPO, "wire", "testdata");
const golden = (name) => JSON.parse(readFileSync(join(GOLDEN, name), "utf8"));

// interfaceKeys lists the keys an exported interface of a source file
// declares, optional ones included.
function interfaceKeys(file, name) {
  const src = readFileSync(join(REPO, "sdk", "typescript", "src", file), "utf8");
  const m = src.match(new RegExp(`export interface ${name} \\{([^}]*)\\}`));
  assert.ok(m, `no interface ${name} in src/${file}`);
  return [...m[1].matchAll(/^\s*(?:readonly\s+)?([A-Za-z_]\w*)\??:/gm)].map((k) => k[1]).sort();
}

test("DenyBody declares exactly the deny body's keys", () => {
  assert.deepEqual(interfaceKeys("web.ts", "DenyBody"), Object.keys(golden("deny-body.json")).sort());
});

test("refusalOf writes the deny body", () => {
  const g = golden("deny-body.json");
  assert.deepEqual(refusalOf(g.reason, g.deny_reasons, g.decision_id).body, g);
});

test("the client reads the error envelope's code and message", async () => {
  const g = golden("error.json");
  assert.deepEqual(Object.keys(g), ["error"]);
  assert.deepEqual(Object.keys(g.error).sort(), ["code", "message"]);
  const body = readFileSync(join(GOLDEN, "error.json"));
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(400, { "content-type": "application/json" }).end(body));
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  try {
    const client = new SvcClient({ sidecarUrl: `http://127.0.0.1:${server.address().port}`, failMode: "closed", timeoutMs: 5000 });
    await assert.rejects(client.authorize("t", "orders:read"), (e) => {
      assert.ok(e instanceof SidecarRequestError, `${e}`);
      assert.equal(e.reason, g.error.code);
      assert.match(e.message, new RegExp(g.error.message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
      return true;
    });
  } finally {
    server.close();
  }
});

test("the credential failures are the sidecar's (reason/testdata/failures.json)", () => {
  const g = JSON.parse(readFileSync(join(REPO, "reason", "testdata", "failures.json"), "utf8"));
  assert.deepEqual([...TOKEN_FAILURES].sort(), [...g.token_failures].sort());
  assert.deepEqual([...API_KEY_FAILURES].sort(), [...g.api_key_failures].sort());
});
