// Real peers for the SDK tests: the svc-sidecar binary built from this
// repository, a JWKS endpoint whose RSA key signs real RS256 tokens, API
// keys made by the core binary, a sidecar that is down, one that never
// answers, and a counting TCP relay. SVC_SIDECAR_BIN and SVC_CORE_BIN name
// prebuilt binaries (make test passes them); otherwise each is built with
// `go build` once per test file.

import { execFileSync, spawn } from "node:child_process";
import { generateKeyPairSync, sign } from "node:crypto";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { SvcClient } from "@svc/sdk";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
export const TENANT = "acme";
export const KID = "sdk-test-rsa-1";
// Bound of each SDK call to a running sidecar in these tests: far above the
// 1 s default, which a call can exceed on a loaded machine. Tests of the
// timeout itself use a black hole and a short timeout of their own.
export const CALL_TIMEOUT_MS = 30_000;

const tmp = mkdtempSync(join(tmpdir(), "svc-sdk-ts-"));
process.on("exit", () => rmSync(tmp, { recursive: true, force: true }));

const binaries = new Map();

/**
 * The binary of the repository's Go package (./cmd/NAME): the environment
 * variable named variable, or built once into NAME in this file's
 * temporary directory.
 */
function goBinary(variable, pkg) {
  if (!binaries.has(pkg)) {
    let bin = process.env[variable];
    if (!bin) {
      bin = join(tmp, pkg.slice(pkg.lastIndexOf("/") + 1));
      execFileSync("go", ["build", "-o", bin, pkg], { cwd: REPO, stdio: "inherit" });
    }
    binaries.set(pkg, bin);
  }
  return binaries.get(pkg);
}

export function sidecarBinary() {
  return goBinary("SVC_SIDECAR_BIN", "./cmd/svc-sidecar");
}

export function coreBinary() {
  return goBinary("SVC_CORE_BIN", "./cmd/core");
}

/**
 * Serves handler (an Express application, or any request listener) on a
 * loopback port: { server, url, close }. close() drops the connections
 * kept alive and resolves when the server has closed.
 */
export async function serve(handler) {
  const server = createServer(handler);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    server,
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    }),
  };
}

/** The id of an API key svck_<id>_<secret>: 12 characters. */
export const keyId = (key) => key.slice("svck_".length, "svck_".length + 12);

/** The subject of the viewer key of apiKeys. */
export const KEY_SUBJECT = "reporting";

/**
 * A sidecar that takes both idp's tokens and the API keys of a key file
 * made by `core api-key create`: viewer (subject KEY_SUBJECT, role viewer),
 * revoked (revoked by `core api-key revoke`), expired (past its expiry)
 * and unknown (the revoked key's id with the viewer's secret: no entry
 * matches). Stop its sidecar.
 */
export async function apiKeys(idp) {
  const dir = mkdtempSync(join(tmp, "api-keys-"));
  const file = join(dir, "api-keys.toml");
  const run = (cmd, ...args) => execFileSync(coreBinary(), ["api-key", cmd, "--file", file, ...args],
    { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  const create = (subject, role, ...extra) => run("create", "--tenant", TENANT, "--subject", subject, "--role", role, ...extra);
  const expired = create("expiring-job", "viewer", "--expires", "1s");
  // The file holds the expiry in whole seconds: past it by then.
  const expiredBy = Math.ceil(Date.now() / 1000 + 1) * 1000 + 100;
  const viewer = create(KEY_SUBJECT, "viewer");
  const revoked = create("old-job", "admin");
  run("revoke", keyId(revoked));
  const unknown = `svck_${keyId(revoked)}_${viewer.slice("svck_".length + 13)}`;
  await new Promise((r) => setTimeout(r, Math.max(0, expiredBy - Date.now())));
  const sidecar = await Sidecar.start(idp, { SVC_API_KEYS_FILE: file });
  return { sidecar, viewer, revoked, unknown, expired };
}

const given = new Set();

/**
 * A loopback address nothing listens on: port 0 is bound and released.
 * A port handed out once is never handed out again by this process, so
 * two listeners of one sidecar cannot be given the same port.
 */
export async function freeAddr() {
  for (let i = 0; i < 50; i++) {
    const srv = net.createServer();
    await new Promise((r) => srv.listen(0, "127.0.0.1", r));
    const { port } = srv.address();
    await new Promise((r) => srv.close(r));
    if (!given.has(port)) {
      given.add(port);
      return `127.0.0.1:${port}`;
    }
  }
  throw new Error("free port: no unused port found");
}

const b64 = (b) => Buffer.from(b).toString("base64url");

export function newKey() {
  return generateKeyPairSync("rsa", { modulusLength: 2048 });
}

/** A JWKS endpoint on loopback and the RSA key that signs its tokens. */
export class IdP {
  static async start() {
    const idp = new IdP();
    idp.keys = newKey();
    const jwk = idp.keys.publicKey.export({ format: "jwk" });
    const jwks = JSON.stringify({ keys: [{ ...jwk, kid: KID, use: "sig", alg: "RS256" }] });
    idp.server = createServer((req, res) => {
      if (req.url !== "/jwks.json") {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end(jwks);
    });
    await new Promise((r) => idp.server.listen(0, "127.0.0.1", r));
    idp.jwksUrl = `http://127.0.0.1:${idp.server.address().port}/jwks.json`;
    return idp;
  }

  /** An RS256 token of exactly claims, signed by the IdP's key or by privateKey under the IdP's kid. */
  token(claims, privateKey = this.keys.privateKey) {
    const signing = `${b64(JSON.stringify({ alg: "RS256", typ: "JWT", kid: KID }))}.${b64(JSON.stringify(claims))}`;
    return `${signing}.${b64(sign("sha256", Buffer.from(signing), privateKey))}`;
  }

  close() {
    this.server.closeAllConnections?.();
    this.server.close();
  }
}

export function claims(over = {}) {
  const now = Math.floor(Date.now() / 1000);
  return { sub: "alice", tenant_id: TENANT, roles: ["viewer"], iat: now, exp: now + 300, ...over };
}

/** A svc-sidecar process on loopback ports, verifying tokens of idp. */
export class Sidecar {
  /**
   * Starts a sidecar and waits until /readyz answers 200. A port released
   * by freeAddr can be taken by another process before the sidecar binds
   * it; a start that fails that way is tried again on fresh ports.
   */
  static async start(idp, env = {}) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await Sidecar.#startOnce(idp, env);
      } catch (e) {
        if (attempt >= 3 || !e.addrInUse) {
          process.stderr.write(`${e.message}\n`);
          throw e;
        }
      }
    }
  }

  static async #startOnce(idp, env) {
    const sc = new Sidecar();
    sc.httpAddr = env.SVC_HTTP_ADDR ?? (await freeAddr());
    sc.dir = mkdtempSync(join(tmp, "sidecar-"));
    sc.logPath = join(sc.dir, "sidecar.log");
    const fd = openSync(sc.logPath, "w");
    sc.proc = spawn(sidecarBinary(), [], {
      cwd: sc.dir,
      stdio: ["ignore", fd, fd],
      env: {
        PATH: process.env.PATH ?? "",
        HOME: sc.dir,
        SVC_SIDECAR_ADDR: await freeAddr(),
        SVC_HTTP_ADDR: sc.httpAddr,
        SVC_TENANT_ID: TENANT,
        SVC_JWKS_URL: idp.jwksUrl,
        SVC_FAIL_MODE: "closed",
        SVC_AUDIT_DESTINATION: "off",
        SVC_LOG_LEVEL: "warn",
        SVC_RATE_LIMIT_DEFAULT_RPM: "1000000",
        ...env,
      },
    });
    closeSync(fd);
    sc.exited = new Promise((r) => sc.proc.once("exit", r));
    sc.url = `http://${sc.httpAddr}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (sc.proc.exitCode !== null || sc.proc.signalCode !== null) {
        const log = sc.log();
        const err = new Error(`svc-sidecar exited (${sc.proc.exitCode ?? sc.proc.signalCode}): ${log}`);
        err.addrInUse = log.includes("address already in use");
        throw err;
      }
      try {
        const r = await fetch(`${sc.url}/readyz`, { signal: AbortSignal.timeout(1000) });
        if (r.status === 200) return sc;
      } catch {
        // not yet
      }
      if (Date.now() > deadline) {
        await sc.stop();
        throw new Error(`svc-sidecar not ready within 60s: ${sc.log()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  log() {
    return readFileSync(this.logPath, "utf8").slice(-4000);
  }

  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill("SIGTERM");
      const t = setTimeout(() => this.proc.kill("SIGKILL"), 30_000);
      await this.exited;
      clearTimeout(t);
    }
  }
}

/**
 * An IdP, a sidecar trusting it (with the variables of env) and a
 * fail-closed client of that sidecar; stop ends the sidecar and the IdP.
 */
export async function startSidecar(env = {}) {
  const idp = await IdP.start();
  const sidecar = await Sidecar.start(idp, env);
  const client = new SvcClient({ sidecarUrl: sidecar.url, failMode: "closed", timeoutMs: CALL_TIMEOUT_MS });
  const stop = async () => {
    await sidecar.stop();
    idp.close();
  };
  return { idp, sidecar, client, stop };
}

/** The URL of a sidecar that is down: nothing listens there. */
export async function downUrl() {
  return `http://${await freeAddr()}`;
}

/** A TCP listener that accepts connections and never answers, as a hung sidecar would. */
export async function blackHole() {
  const sockets = new Set();
  const srv = net.createServer((s) => {
    sockets.add(s);
    s.on("error", () => {});
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    close() {
      for (const s of sockets) s.destroy();
      srv.close();
    },
  };
}

/** A TCP relay to target (host:port) counting the connections it accepted. */
export async function relay(target) {
  const [host, port] = [target.slice(0, target.lastIndexOf(":")), Number(target.slice(target.lastIndexOf(":") + 1))];
  const pairs = new Set();
  const r = { accepted: 0 };
  const srv = net.createServer((c) => {
    r.accepted++;
    const u = net.connect(port, host);
    const pair = [c, u];
    pairs.add(pair);
    c.pipe(u);
    u.pipe(c);
    const end = () => {
      c.destroy();
      u.destroy();
      pairs.delete(pair);
    };
    c.on("error", end).on("close", end);
    u.on("error", end).on("close", end);
  });
  await new Promise((res) => srv.listen(0, "127.0.0.1", res));
  r.url = `http://127.0.0.1:${srv.address().port}`;
  r.dropAll = async () => {
    for (const [c, u] of pairs) {
      c.destroy();
      u.destroy();
    }
    pairs.clear();
    await new Promise((res) => setTimeout(res, 50));
  };
  r.close = async () => {
    await r.dropAll();
    srv.close();
  };
  return r;
}

/**
 * A loopback listener whose accept queue is full, so that connecting to it
 * hangs, as with a sidecar too busy to accept. Node accepts every
 * connection itself, so a python3 process holds the listener.
 */
export async function fullBacklog() {
  const script = [
    "import socket, sys",
    "l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(0)",
    "port = l.getsockname()[1]; fill = []",
    "for _ in range(3):",
    "    c = socket.socket(); c.setblocking(False)",
    "    try: c.connect(('127.0.0.1', port))",
    "    except BlockingIOError: pass",
    "    fill.append(c)",
    "print(port, flush=True)",
    "sys.stdin.read()",
  ].join("\n");
  const child = spawn("python3", ["-c", script], { stdio: ["pipe", "pipe", "inherit"] });
  const port = await new Promise((resolve, reject) => {
    let out = "";
    child.on("error", reject);
    child.on("exit", (code) => reject(new Error(`python3 exited ${code} before listening`)));
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve(Number(out.trim()));
    });
  });
  // Let the filling connections reach the queue.
  await new Promise((r) => setTimeout(r, 200));
  return {
    url: `http://127.0.0.1:${port}`,
    close() {
      child.stdin.end();
      child.kill();
    },
  };
}
