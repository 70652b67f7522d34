/**
 * Where a client's sidecar URL and fail mode, and the sign-in gateways'
 * public URLs, come from when the options leave them out: the
 * environment, then svc.toml, as the Go client and the sidecar read them.
 */

import { readFileSync } from "node:fs";

/** Read in the working directory when the options and the environment leave something unset. */
export const DEFAULT_CONFIG_FILE = "svc.toml";

/**
 * The SAML gateway's public ACS URL (sdk.saml.acs_url) where the options
 * leave it out, as the Go and Python middlewares find it: SVC_SAML_ACS_URL,
 * else the key in configFile (a missing file is none), else "". It says
 * whether the gateway's cookies are Secure, and so `__Host-` prefixed.
 */
export function gatewayAcsUrl(env: Record<string, string | undefined> = process.env,
  configFile: string | null = DEFAULT_CONFIG_FILE): string {
  if (env.SVC_SAML_ACS_URL) return env.SVC_SAML_ACS_URL;
  const text = configText(configFile);
  if (text === undefined) return "";
  const v = tomlKeysOf(text, { "sdk.saml.acs_url": "string" }, configFile ?? undefined)["sdk.saml.acs_url"];
  return typeof v === "string" ? v : "";
}

/**
 * The public URL (redirect_url) of each OpenID Connect provider the
 * sidecar's OpenID Connect gateway signs browsers in with, as the sidecar
 * lists them: [sdk.oidc]'s own, SVC_OIDC_REDIRECT_URL else
 * sdk.oidc.redirect_url, when SVC_OIDC_ISSUER_URL or sdk.oidc.issuer_url is
 * set; then that of each [[sdk.oidc.providers]] entry, whose default is
 * the former. URLs not set are left out; a missing file is none. Like
 * gatewayAcsUrl they say whether the gateway's cookies are Secure.
 */
export function oidcRedirectUrls(env: Record<string, string | undefined> = process.env,
  configFile: string | null = DEFAULT_CONFIG_FILE): string[] {
  return oidcRedirectUrlsOf(configText(configFile), env, configFile ?? undefined);
}

/** oidcRedirectUrls of a TOML document (undefined: no file). */
export function oidcRedirectUrlsOf(text: string | undefined, env: Record<string, string | undefined>,
  path = DEFAULT_CONFIG_FILE): string[] {
  let issuer = env.SVC_OIDC_ISSUER_URL ?? "";
  let redirect = env.SVC_OIDC_REDIRECT_URL ?? "";
  const providers: string[] = [];
  if (text !== undefined) {
    const top: Record<string, string> = {};
    scanToml(text, OIDC_KEYS, path, (name, v) => {
      if (name !== "sdk.oidc.providers.redirect_url") top[name] = String(v);
      else if (providers.length > 0) providers[providers.length - 1] = String(v);
    }, (table) => {
      if (table === "sdk.oidc.providers") providers.push("");
    });
    issuer ||= top["sdk.oidc.issuer_url"] ?? "";
    redirect ||= top["sdk.oidc.redirect_url"] ?? "";
  }
  const urls = issuer ? [redirect] : [];
  for (const p of providers) urls.push(p || redirect);
  return urls.filter(Boolean);
}

const OIDC_KEYS: Record<string, TomlKind> = {
  "sdk.oidc.issuer_url": "string",
  "sdk.oidc.redirect_url": "string",
  "sdk.oidc.providers.redirect_url": "string",
};

/** The text of configFile; undefined when it is null or does not exist. */
export function configText(configFile: string | null): string | undefined {
  if (!configFile) return undefined;
  try {
    return readFileSync(configFile, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new TypeError(`${configFile}: ${(e as Error).message}`);
  }
}

/** The [sdk] keys a client uses. */
export interface SdkKeys {
  sidecar_addr?: string;
  fail_mode?: string;
}

/** A resolved setting and where it came from (an option, a variable, a file key, or "default"). */
export interface Setting {
  value: string;
  source: string;
}

export interface ResolvedSettings {
  sidecarUrl: Setting;
  failMode: Setting;
}

/**
 * The sidecar URL: the option, SVC_SIDECAR_URL, then SVC_SIDECAR_ADDR and
 * sdk.sidecar_addr of the file, each only when it is an http(s) URL (a
 * host:port there is the sidecar's gRPC address, which this client does not
 * speak), then `defaultUrl`. The fail mode: the option, SVC_FAIL_MODE,
 * sdk.fail_mode of the file, then "open". `configFile` null reads no file;
 * a missing file is no error, an unreadable or malformed one is.
 */
export function resolveSettings(sidecarUrl: string | undefined, failMode: string | undefined,
  env: Record<string, string | undefined>, configFile: string | null, defaultUrl: string): ResolvedSettings {
  const url: [string | undefined, string][] = [[sidecarUrl, "sidecarUrl"], [env.SVC_SIDECAR_URL, "SVC_SIDECAR_URL"],
    [httpUrl(env.SVC_SIDECAR_ADDR), "SVC_SIDECAR_ADDR"]];
  const mode: [string | undefined, string][] = [[failMode, "failMode"], [env.SVC_FAIL_MODE, "SVC_FAIL_MODE"]];
  if (configFile && !(first(url) && first(mode))) {
    const sdk = readSdkTable(configFile);
    url.push([httpUrl(sdk.sidecar_addr), `sdk.sidecar_addr of ${configFile}`]);
    mode.push([sdk.fail_mode, `sdk.fail_mode of ${configFile}`]);
  }
  return {
    sidecarUrl: first(url) ?? { value: defaultUrl, source: "default" },
    failMode: first(mode) ?? { value: "open", source: "default" },
  };
}

function first(choices: [string | undefined, string][]): Setting | undefined {
  for (const [value, source] of choices) if (value) return { value, source };
  return undefined;
}

function httpUrl(v: string | undefined): string | undefined {
  const s = (v ?? "").trim();
  return s.startsWith("http://") || s.startsWith("https://") ? s : undefined;
}

/** The string keys sidecar_addr and fail_mode of the [sdk] table of a TOML file; {} when it does not exist. */
export function readSdkTable(path: string): SdkKeys {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new TypeError(`${path}: ${(e as Error).message}`);
  }
  return sdkKeysOf(text, path);
}

const SDK_KEYS: Record<string, "string"> = { "sdk.sidecar_addr": "string", "sdk.fail_mode": "string" };

/**
 * The [sdk] string keys of a TOML document. Node has no TOML parser and the
 * package has no dependencies, so this reads just enough of TOML 1.0 to
 * find them: table headers, key/value pairs (bare, quoted and dotted keys),
 * the four string forms, comments, and values spanning lines (arrays,
 * multi-line strings), which are skipped. A wanted key that is not a plain
 * string, or a line it cannot read, is an error naming the file and line.
 */
export function sdkKeysOf(text: string, path = DEFAULT_CONFIG_FILE): SdkKeys {
  const out: SdkKeys = {};
  for (const [k, v] of Object.entries(tomlKeysOf(text, SDK_KEYS, path))) out[k.slice(4) as keyof SdkKeys] = String(v);
  return out;
}

/** The kind of value a wanted key must have. */
export type TomlKind = "string" | "integer" | "boolean";

/**
 * The values of the wanted keys (full dotted paths, e.g. "sdk.saml.cookie_name")
 * of a TOML document, read as sdkKeysOf reads [sdk]; a key of another kind
 * than wanted is an error naming the file and line.
 */
export function tomlKeysOf(text: string, wanted: Record<string, TomlKind>,
  path = DEFAULT_CONFIG_FILE): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  scanToml(text, wanted, path, (name, v) => {
    out[name] = v;
  });
  return out;
}

/**
 * Reads a TOML document as tomlKeysOf does, handing each wanted key's
 * value to visit and the path of each [[array of tables]] header, as it
 * opens a new entry, to arrayTable.
 */
function scanToml(text: string, wanted: Record<string, TomlKind>, path: string,
  visit: (name: string, value: string | number | boolean) => void, arrayTable?: (table: string) => void): void {
  const sc = new Scanner(text.startsWith("\uFEFF") ? text.slice(1) : text, path);
  const tables = new Set(Object.keys(wanted).flatMap((k) => {
    const parts = k.split(".");
    return parts.slice(1).map((_, i) => parts.slice(0, i + 1).join("."));
  }));
  let table: string[] = [];
  for (;;) {
    sc.skipBlank();
    if (sc.done()) return;
    if (sc.peek() === "[") {
      const array = sc.text.startsWith("[[", sc.pos);
      sc.pos += array ? 2 : 1;
      table = sc.keyPath();
      sc.expect(array ? "]]" : "]");
      sc.endOfLine();
      if (array) arrayTable?.(table.join("."));
      continue;
    }
    const key = [...table, ...sc.keyPath()];
    sc.expect("=");
    const name = key.join(".");
    if (tables.has(name)) {
      throw sc.error(`${name} is read as a [${name}] table, not as an inline table`);
    }
    const kind = wanted[name];
    if (kind !== undefined) {
      const line = sc.line();
      const v = kind === "string" ? sc.singleLineString() : kind === "integer" ? sc.integer() : sc.boolean();
      if (v === undefined) throw sc.error(`${name} must be ${kind === "integer" ? "an integer" : `a ${kind}`}`, line);
      visit(name, v);
    } else {
      sc.skipValue();
    }
    sc.endOfLine();
  }
}

class Scanner {
  pos = 0;
  constructor(readonly text: string, readonly path: string) {}

  done(): boolean {
    return this.pos >= this.text.length;
  }

  peek(): string {
    return this.text[this.pos] ?? "";
  }

  line(at = this.pos): number {
    let n = 1;
    for (let i = 0; i < at && i < this.text.length; i++) if (this.text[i] === "\n") n++;
    return n;
  }

  error(msg: string, line = this.line()): TypeError {
    return new TypeError(`${this.path}:${line}: ${msg}`);
  }

  /** Skips spaces, tabs, comments and newlines. */
  skipBlank(): void {
    while (!this.done()) {
      const c = this.peek();
      if (c === " " || c === "\t" || c === "\r" || c === "\n") this.pos++;
      else if (c === "#") this.skipComment();
      else return;
    }
  }

  skipSpaces(): void {
    while (this.peek() === " " || this.peek() === "\t") this.pos++;
  }

  skipComment(): void {
    while (!this.done() && this.peek() !== "\n") this.pos++;
  }

  expect(s: string): void {
    this.skipSpaces();
    if (!this.text.startsWith(s, this.pos)) throw this.error(`expected "${s}"`);
    this.pos += s.length;
  }

  /** Only a comment may follow on the line. */
  endOfLine(): void {
    this.skipSpaces();
    if (this.peek() === "#") this.skipComment();
    if (this.peek() === "\r") this.pos++;
    if (!this.done() && this.peek() !== "\n") throw this.error("unexpected text after the value");
  }

  /** A dotted key: bare or quoted parts separated by dots. */
  keyPath(): string[] {
    const parts: string[] = [];
    for (;;) {
      this.skipSpaces();
      const c = this.peek();
      let part: string | undefined;
      if (c === '"' || c === "'") {
        part = this.singleLineString();
      } else {
        const m = /^[A-Za-z0-9_-]+/.exec(this.text.slice(this.pos, this.pos + 256));
        if (m) {
          part = m[0];
          this.pos += part.length;
        }
      }
      if (part === undefined) throw this.error("expected a key");
      parts.push(part);
      this.skipSpaces();
      if (this.peek() !== ".") return parts;
      this.pos++;
    }
  }

  /** A decimal integer (underscores allowed between digits), or undefined. */
  integer(): number | undefined {
    this.skipSpaces();
    const m = /^[+-]?\d+(?:_\d+)*(?=[\s#]|$)/.exec(this.text.slice(this.pos, this.pos + 64));
    if (!m) return undefined;
    this.pos += m[0].length;
    const n = Number(m[0].replace(/_/g, ""));
    return Number.isSafeInteger(n) ? n : undefined;
  }

  /** true or false, or undefined. */
  boolean(): boolean | undefined {
    this.skipSpaces();
    const m = /^(true|false)(?=[\s#]|$)/.exec(this.text.slice(this.pos, this.pos + 8));
    if (!m) return undefined;
    this.pos += m[0].length;
    return m[1] === "true";
  }

  /** A basic or literal string on one line, or undefined (position unchanged) when none starts here. */
  singleLineString(): string | undefined {
    this.skipSpaces();
    const q = this.peek();
    if ((q !== '"' && q !== "'") || this.text.startsWith(q.repeat(3), this.pos)) return undefined;
    let i = this.pos + 1;
    let v = "";
    while (i < this.text.length) {
      const c = this.text[i]!;
      if (c === "\n") break;
      if (c === q) {
        this.pos = i + 1;
        return v;
      }
      if (c === "\\" && q === '"') {
        const [s, n] = unescape(this.text, i);
        if (s === undefined) throw this.error("invalid escape in a string");
        v += s;
        i += n;
        continue;
      }
      v += c;
      i++;
    }
    throw this.error("unterminated string");
  }

  /** Skips any value: strings of each form, and brackets/braces across lines. */
  skipValue(): void {
    this.skipSpaces();
    let depth = 0;
    while (!this.done()) {
      const c = this.peek();
      if (c === '"' || c === "'") {
        const triple = c.repeat(3);
        if (this.text.startsWith(triple, this.pos)) {
          const end = this.findTripleEnd(c);
          if (end < 0) throw this.error("unterminated multi-line string");
          this.pos = end;
        } else {
          this.singleLineString();
        }
      } else if (c === "[" || c === "{") {
        depth++;
        this.pos++;
      } else if (c === "]" || c === "}") {
        depth--;
        this.pos++;
      } else if (c === "#") {
        if (depth === 0) return;
        this.skipComment();
      } else if (c === "\n" && depth <= 0) {
        return;
      } else {
        this.pos++;
      }
    }
  }

  // The position after the closing delimiter of the multi-line string
  // opening here (up to two more quotes may end its content), or -1.
  findTripleEnd(q: string): number {
    let i = this.pos + 3;
    while (i < this.text.length) {
      if (q === '"' && this.text[i] === "\\") {
        i += 2;
        continue;
      }
      if (this.text.startsWith(q.repeat(3), i)) {
        let end = i + 3;
        while (end - i < 5 && this.text[end] === q) end++;
        return end;
      }
      i++;
    }
    return -1;
  }
}

const ESCAPES: Record<string, string> = { b: "\b", t: "\t", n: "\n", f: "\f", r: "\r", '"': '"', "\\": "\\", e: "\x1b" };

function unescape(text: string, at: number): [string | undefined, number] {
  const c = text[at + 1] ?? "";
  if (c in ESCAPES) return [ESCAPES[c], 2];
  const len = c === "u" ? 4 : c === "U" ? 8 : 0;
  const hex = text.slice(at + 2, at + 2 + len);
  if (len === 0 || !/^[0-9A-Fa-f]+$/.test(hex) || hex.length !== len) return [undefined, 0];
  const cp = parseInt(hex, 16);
  if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return [undefined, 0];
  return [String.fromCodePoint(cp), 2 + len];
}
