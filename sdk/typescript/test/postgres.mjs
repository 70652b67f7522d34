// A real PostgreSQL for the plan tests: Debian's postgresql binaries
// (/usr/lib/postgresql/<version>/bin), initdb and postgres run as the
// unprivileged user postgres (runuser -u postgres --, when these tests run
// as root) in a temporary directory chowned to it, listening on a Unix
// socket in that directory only. Tests skip when the binaries are absent.

import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import pg from "pg";

/** The directory of initdb, pg_ctl and postgres; null when PostgreSQL is not installed. */
export function postgresBin() {
  if (process.env.SVC_PG_BIN) return process.env.SVC_PG_BIN;
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0], "bin") : null;
}

/** Why the PostgreSQL tests cannot run, or null when they can. */
export function postgresMissing() {
  if (!postgresBin()) return "PostgreSQL not installed (apt-get install postgresql)";
  if (process.getuid?.() === 0) {
    try {
      execFileSync("id", ["-u", "postgres"], { stdio: "ignore" });
    } catch {
      return "running as root and there is no user postgres to run the server as";
    }
  }
  return null;
}

/**
 * Starts a PostgreSQL server in a new temporary directory; returns
 * { pool, stop }. pool is a pg.Pool on database postgres.
 */
export async function startPostgres() {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), "svc-sdk-pg-"));
  const data = join(dir, "data");
  const asRoot = process.getuid?.() === 0;
  const run = (cmd, args) => {
    const [file, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", join(bin, cmd), ...args]] : [join(bin, cmd), args];
    return execFileSync(file, argv, { cwd: dir, stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
  };
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
  }
  const log = join(dir, "postgres.log");
  try {
    run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"]);
    run("pg_ctl", ["-D", data, "-l", log, "-w", "-t", "60", "-o",
      `-k ${dir} -c listen_addresses='' -c fsync=off -c max_connections=10 -c shared_buffers=16MB`, "start"]);
  } catch (e) {
    const out = existsSync(log) ? readFileSync(log, "utf8") : "";
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`postgres did not start: ${e.stderr?.toString() ?? e}\n${out}`);
  }
  const pool = new pg.Pool({ host: dir, user: "postgres", database: "postgres", max: 2 });
  const stop = async () => {
    await pool.end();
    try {
      run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  return { pool, stop };
}
