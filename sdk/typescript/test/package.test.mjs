// The package as it is published: `npm pack` (its prepack builds dist/),
// installed from the tarball into an empty project, every entry point of
// package.json "exports" imported from ESM and required from CommonJS, and
// a consumer .ts file type-checked against the installed declarations.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const PKG_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const manifest = JSON.parse(readFileSync(join(PKG_DIR, "package.json"), "utf8"));

// What each entry point must export at run time (a subset: the names the
// README's examples use).
const EXPECTED = {
  "@svc/sdk": ["SvcClient", "SvcError", "SidecarUnavailableError", "bearerToken", "apiKey", "resolveSettings"],
  "@svc/sdk/express": ["svcExpress", "requireAction"],
  "@svc/sdk/fastify": ["svcFastify", "requireAction"],
  "@svc/sdk/identity": ["IdentityVerifier", "IdentityError", "svcIdentityExpress", "identityRefusal"],
  "@svc/sdk/saml": ["loginUrl", "samlAcs", "samlLoginRedirect", "exchangeAssertion", "resolveSamlConfig",
    "wantsLoginRedirect"],
};

/** The version of a dev dependency as the lockfile installed it. */
function installed(name) {
  return JSON.parse(readFileSync(join(PKG_DIR, "node_modules", name, "package.json"), "utf8")).version;
}

function run(cmd, args, cwd) {
  return execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 240_000 });
}

describe("the npm package installed from its tarball", () => {
  let dir, project, tarball;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "svc-sdk-pack-"));
    // As in a fresh checkout: no dist/ until the pack's prepack builds it.
    rmSync(join(PKG_DIR, "dist"), { recursive: true, force: true });
    const out = run("npm", ["pack", "--json", "--pack-destination", dir], PKG_DIR);
    const [info] = JSON.parse(out.slice(out.indexOf("[")));
    tarball = join(dir, info.filename);
    project = join(dir, "app");
    mkdirSync(project);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    // The package has no dependencies; the frameworks and types the
    // consumer brings are the lockfile's versions, from the npm cache
    // (npm ci filled it) when it holds them.
    run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--no-save", tarball,
      `express@${installed("express")}`, `fastify@${installed("fastify")}`,
      `@types/express@${installed("@types/express")}`, `@types/node@${installed("@types/node")}`], project);
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("the tarball carries the built code of every export", () => {
    const files = run("tar", ["-tzf", tarball], dir).split("\n");
    for (const [sub, e] of Object.entries(manifest.exports)) {
      for (const cond of ["types", "import", "default"]) {
        assert.ok(e[cond], `exports["${sub}"] has no "${cond}"`);
        assert.ok(files.includes(`package/${e[cond].replace(/^\.\//, "")}`), `${e[cond]} of "${sub}" is not in the tarball`);
      }
    }
    assert.ok(files.includes("package/README.md"));
  });

  test("the manifest says what a registry shows", () => {
    // The Node versions docs/typescript.md accepts are the engines range:
    // those that require() an ES module without a flag (below).
    assert.equal(manifest.engines.node, "^20.19.0 || >=22.12.0");
    const page = readFileSync(join(PKG_DIR, "..", "..", "docs", "typescript.md"), "utf8");
    assert.ok(page.includes(`(\`engines\`: \`${manifest.engines.node}\`)`),
      "docs/typescript.md names the engines range of package.json");
    const started = readFileSync(join(PKG_DIR, "..", "..", "docs", "getting-started.md"), "utf8");
    assert.ok(started.includes(`\`engines\`: \`${manifest.engines.node}\``),
      "docs/getting-started.md names the engines range of package.json");
    assert.equal(manifest.repository.directory, "sdk/typescript");
    assert.ok(manifest.keywords.includes("saml"));
    assert.equal(manifest.scripts.prepack, "npm run build");
    assert.deepEqual(Object.keys(manifest.exports).map((k) => k === "." ? "@svc/sdk" : `@svc/sdk/${k.slice(2)}`).sort(),
      Object.keys(EXPECTED).sort(), "every export is checked below");
  });

  test("every entry point imports from ESM", () => {
    for (const [spec, names] of Object.entries(EXPECTED)) {
      const code = `const m = await import(${JSON.stringify(spec)});
        const missing = ${JSON.stringify(names)}.filter((n) => typeof m[n] !== "function");
        if (missing.length) { console.error("missing", missing); process.exit(1); }`;
      run(process.execPath, ["--input-type=module", "-e", code], project);
    }
  });

  // require() of an ES module needs Node 20.19 or 22.12 (the package's engines).
  const [major, minor] = process.versions.node.split(".").map(Number);
  const requireEsm = major > 22 || (major === 22 && minor >= 12) || (major === 20 && minor >= 19);
  test("every entry point requires from CommonJS", { skip: requireEsm ? false : `node ${process.version} has no require(esm)` }, () => {
    for (const [spec, names] of Object.entries(EXPECTED)) {
      const code = `const m = require(${JSON.stringify(spec)});
        const missing = ${JSON.stringify(names)}.filter((n) => typeof m[n] !== "function");
        if (missing.length) { console.error("missing", missing); process.exit(1); }`;
      run(process.execPath, ["--no-warnings", "-e", code], project);
    }
  });

  test("a consumer type-checks against the installed declarations", () => {
    writeFileSync(join(project, "tsconfig.json"), JSON.stringify({
      compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true,
        noEmit: true, types: ["node"], skipLibCheck: false, esModuleInterop: true },
      include: ["consumer.ts"],
    }));
    writeFileSync(join(project, "consumer.ts"), `
import express from "express";
import Fastify from "fastify";
import { type Decision, SvcClient, type TokenDecision } from "@svc/sdk";
import { requireAction, svcExpress } from "@svc/sdk/express";
import { svcFastify } from "@svc/sdk/fastify";
import { loginUrl, resolveSamlConfig, samlAcs, samlLoginRedirect, type SamlConfig, wantsLoginRedirect } from "@svc/sdk/saml";

const client = new SvcClient({ sidecarUrl: "http://127.0.0.1:7700", failMode: "closed" });
export async function check(token: string): Promise<boolean> {
  const t: TokenDecision = await client.validateToken(token);
  const d: Decision = await client.authorize(token, "orders:read", { resourceId: "42" });
  return t.allowed && d.allow;
}
const app = express();
app.post("/auth/saml/acs", samlAcs());
app.use(samlLoginRedirect());
app.use(svcExpress({ client, sessionCookie: "svc_session" }));
app.get("/orders/:id", requireAction("orders:read", { resourceIdParam: "id" }), (_req, res) => { res.json({}); });
const f = Fastify();
await f.register(svcFastify, { client });
const saml: SamlConfig = resolveSamlConfig({ entityId: "https://app.example/saml" });
const url: string = loginUrl("/orders", { prefix: saml.pathPrefix });
const redirect: boolean = wantsLoginRedirect("GET", "text/html", undefined);
// @ts-expect-error: the client takes an options object
new SvcClient("http://127.0.0.1:7700");
export { url, redirect };
`);
    // The compiler is the SDK's own (a consumer would bring its own).
    const tsc = join(PKG_DIR, "node_modules", "typescript", "bin", "tsc");
    try {
      run(process.execPath, [tsc, "-p", "tsconfig.json"], project);
    } catch (e) {
      assert.fail(`tsc: ${e.stdout}${e.stderr}`);
    }
  });
});
