// Where SvcClient takes its sidecar URL and fail mode from: options, the
// environment, then the [sdk] table of svc.toml, in the same order as the
// Python client and with the same keys as the Go client.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";

import { SvcClient } from "@svc/sdk";

import { sdkKeysOf } from "../dist/config.js";

import { REPO } from "./harness.mjs";

const dir = mkdtempSync(join(tmpdir(), "svc-sdk-config-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(name, text) {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

const URL_CLOSED = `# the application's svc.toml
[sdk]
sidecar_addr = "https://sidecar.internal:7700"  # the local HTTP API
fail_mode = 'closed'
tenant_id = "acme"

[sdk.saml]
sidecar_addr = "http://not-this-one:1"
fail_mode = "open"
`;
const fileUrlClosed = file("url-closed.toml", URL_CLOSED);
// The sidecar's own svc.toml: sidecar_addr is its gRPC listen address.
const fileGrpcOpen = file("grpc-open.toml", '[sdk]\nsidecar_addr = "[::1]:50051"\nfail_mode = "open"\n');
const fileOther = file("other.toml", '[sidecar]\nhttp_addr = "127.0.0.1:7700"\n');

describe("svc.toml and the environment", () => {
  test("order: options, SVC_SIDECAR_URL, SVC_SIDECAR_ADDR (a URL), svc.toml, defaults", () => {
    const cases = [
      ["SVC_SIDECAR_ADDR as a URL", { SVC_SIDECAR_ADDR: "http://127.0.0.1:8" }, {}, "http://127.0.0.1:8", "open"],
      ["SVC_SIDECAR_ADDR as host:port is the gRPC address, not ours", { SVC_SIDECAR_ADDR: "[::1]:50051" }, {},
        "http://localhost:7700", "open"],
      ["SVC_SIDECAR_URL before SVC_SIDECAR_ADDR",
        { SVC_SIDECAR_URL: "http://127.0.0.1:9", SVC_SIDECAR_ADDR: "https://sidecar.internal:7700" }, {},
        "http://127.0.0.1:9", "open"],
      ["svc.toml", {}, { configFile: fileUrlClosed }, "https://sidecar.internal:7700", "closed"],
      ["svc.toml with a gRPC address", {}, { configFile: fileGrpcOpen }, "http://localhost:7700", "open"],
      ["environment before svc.toml", { SVC_SIDECAR_ADDR: "http://127.0.0.1:8", SVC_FAIL_MODE: "open" },
        { configFile: fileUrlClosed }, "http://127.0.0.1:8", "open"],
      ["svc.toml fills what the environment leaves", { SVC_SIDECAR_URL: "http://127.0.0.1:9" },
        { configFile: fileUrlClosed }, "http://127.0.0.1:9", "closed"],
      ["options before everything", { SVC_SIDECAR_URL: "http://127.0.0.1:9", SVC_FAIL_MODE: "closed" },
        { configFile: fileUrlClosed, sidecarUrl: "http://[::1]:7700", failMode: "open" }, "http://[::1]:7700", "open"],
      ["no file", {}, { configFile: null }, "http://localhost:7700", "open"],
      ["a missing file", {}, { configFile: join(dir, "missing.toml") }, "http://localhost:7700", "open"],
      ["svc.toml without [sdk]", {}, { configFile: fileOther }, "http://localhost:7700", "open"],
    ];
    for (const [name, env, opts, url, mode] of cases) {
      const c = new SvcClient({ env, ...opts });
      assert.deepEqual([c.sidecarUrl, c.failMode], [url, mode], name);
    }
  });

  test("svc.toml in the working directory", () => {
    const wd = join(dir, "wd");
    mkdirSync(wd);
    writeFileSync(join(wd, "svc.toml"), URL_CLOSED);
    const cwd = process.cwd();
    process.chdir(wd);
    try {
      const c = new SvcClient({ env: {} });
      assert.deepEqual([c.sidecarUrl, c.failMode], ["https://sidecar.internal:7700", "closed"]);
    } finally {
      process.chdir(cwd);
    }
  });

  test("the shipped svc.example.toml", () => {
    const p = join(REPO, "svc.example.toml");
    assert.deepEqual(sdkKeysOf(readFileSync(p, "utf8"), p), { sidecar_addr: "[::1]:50051", fail_mode: "closed" });
    const c = new SvcClient({ env: {}, configFile: p });
    assert.deepEqual([c.sidecarUrl, c.failMode], ["http://localhost:7700", "closed"]);
  });

  test("what the reader understands", () => {
    const cases = [
      ["dotted key at the root", 'sdk.fail_mode = "closed"\n', { fail_mode: "closed" }],
      ["quoted keys", '["sdk"]\n"fail_mode" = "closed"\n\'sidecar_addr\' = "http://a:1"\n',
        { fail_mode: "closed", sidecar_addr: "http://a:1" }],
      ["spaces in the header", "[ sdk ]\nfail_mode = \"closed\"\n", { fail_mode: "closed" }],
      ["escapes", '[sdk]\nsidecar_addr = "http://h\\u0041:1"\n', { sidecar_addr: "http://hA:1" }],
      ["CRLF", '[sdk]\r\nfail_mode = "closed"\r\n', { fail_mode: "closed" }],
      ["a byte order mark", '\uFEFF[sdk]\nfail_mode = "closed"\n', { fail_mode: "closed" }],
      ["a later [sdk] key after an array spanning lines",
        '[sdk]\naccepted_tenants = [\n  "a", # one\n  ["[x]"],\n]\nfail_mode = "closed"\n', { fail_mode: "closed" }],
      ["a multi-line string holding a header",
        '[policy]\nnote = """\n[sdk]\nfail_mode = "open"\n"""\n[sdk]\nfail_mode = "closed"\n', { fail_mode: "closed" }],
      ["a literal multi-line string", "x = '''\n[sdk]\n'''\n", {}],
      ["a table array", '[[sidecar.routes]]\nfail_mode = "open"\n[sdk]\nfail_mode = "closed"\n', { fail_mode: "closed" }],
      ["other [sdk] keys of any type", '[sdk]\nn = 1\nb = true\nd = 1979-05-27\nt = { a = "b" }\nfail_mode = "closed"\n',
        { fail_mode: "closed" }],
      ["keys of a sub-table are not [sdk]'s", '[sdk.saml]\nfail_mode = "open"\n', {}],
    ];
    for (const [name, text, want] of cases) {
      assert.deepEqual(sdkKeysOf(text, "t.toml"), want, name);
    }
  });

  test("bad files are errors that name the file and line", () => {
    const cases = [
      ["fail_mode not a string", "[sdk]\nfail_mode = true\n", /t\.toml:2: sdk\.fail_mode must be a string/],
      ["sidecar_addr not a string", "[sdk]\nsidecar_addr = 7700\n", /t\.toml:2: sdk\.sidecar_addr must be a string/],
      ["a multi-line fail_mode", '[sdk]\nfail_mode = """closed"""\n', /t\.toml:2: sdk\.fail_mode must be a string/],
      ["an unclosed header", "[sdk\nfail_mode = \"closed\"\n", /t\.toml:1: expected "\]"/],
      ["no equals sign", "[sdk]\nfail_mode closed\n", /t\.toml:2: expected "="/],
      ["an unterminated string", '[sdk]\nfail_mode = "closed\n', /t\.toml:2: unterminated string/],
      ["text after the value", '[sdk]\nfail_mode = "closed" "open"\n', /t\.toml:2: unexpected text after the value/],
      ["an inline sdk table", 'sdk = { fail_mode = "closed" }\n', /t\.toml:1: sdk is read as a \[sdk\] table/],
      ["a bad escape", '[sdk]\nfail_mode = "\\q"\n', /t\.toml:2: invalid escape/],
    ];
    for (const [name, text, re] of cases) {
      assert.throws(() => sdkKeysOf(text, "t.toml"), re, name);
    }
    const bad = file("bad.toml", "[sdk]\nfail_mode = \"sometimes\"\n");
    assert.throws(() => new SvcClient({ env: {}, configFile: bad }), new RegExp(`sdk\\.fail_mode of ${bad}`));
    assert.throws(() => new SvcClient({ env: {}, configFile: dir }), new RegExp(dir));
  });
});
