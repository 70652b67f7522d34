// An OpenID provider (oidc-provider) for the end-to-end tests.
//
// It listens on a loopback port, issues RS256 JWT access tokens through the
// client_credentials grant with a resource indicator, and adds the custom
// claims tenant_id and roles (and email) configured per client. Its JWKS is
// served at /jwks over plain http, which the sidecar accepts on loopback.
// A client with "opaque": true gets opaque access tokens instead, which
// only token introspection (RFC 7662, /token/introspection, any client
// authenticating with client_secret_basic) can read: the answer carries
// sub (the client id) and the client's custom claims.
//
// Configuration, as JSON in the IDP_CONFIG environment variable, or in the
// file named by IDP_CONFIG_FILE:
//
//   {
//     "host": "127.0.0.1",                   // listen address (default)
//     "port": 0,                             // listen port (default: any)
//     "issuer": "http://127.0.0.1:9400",     // default http://<host>:<port>
//     "resource": "urn:svc:e2e",             // resource indicator and aud
//     "ttl": 300,                            // access token lifetime, s
//     "clients": [{"client_id": "...", "client_secret": "...",
//                  "tenant_id": "acme", "roles": ["viewer"],
//                  "email": "svc@example.test", "opaque": false}]
//   }
//
// When it is ready it prints one JSON line on stdout, with the endpoints at
// the address it listens on:
//   {"issuer": ..., "token_endpoint": ..., "jwks_uri": ...,
//    "introspection_endpoint": ..., "kid": ...}
//
// POST /_admin/rotate generates a new RSA signing key and restarts the
// provider with it on the same listener: new tokens carry the new kid. The
// previous key stays published in the JWKS (the usual overlap of a
// rotation) unless the request has ?retire=1. The answer is
// {"kid": <new kid>, "kids": [<published kids>]}.
//
// A client with "redirect_uris" is a client of browser sign-in instead:
// the authorization code grant (PKCE) and refresh tokens, with an
// optional "backchannel_logout_uri". Its sign-ins complete without a
// page: the user who signs in is the account named like the client,
// whose ID token carries sub (the client id), tenant_id, roles and
// email of the client's entry.
//
// With "users_file" (a JSON file of people, relative to the configuration
// file, in the format of e2e/samlidp/server.mjs's --users:
// {"dana": {"email", "roles": [...], "tenant"}}), sign-ins ask who signs
// in instead: a "Sign in as" page lists the people, without a password,
// and the one picked signs in. The provider then keeps no sign-in
// session between sign-ins (every authorization request asks again, as
// prompt=login), so the next sign-in may pick someone else. The ID token
// of a person carries sub and email (the person's email), tenant_id and
// roles.
//
// GET /_admin/grants counts the token endpoint's answers by grant type
// since the start: {"authorization_code": {"success": 1, "error": 0},
// "refresh_token": {...}}, from the provider's grant.success and
// grant.error events.
//
// SIGTERM or SIGINT closes the listener and exits 0.

import { generateKeyPair, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, resolve } from 'node:path';
import { promisify } from 'node:util';

import Provider from 'oidc-provider';

const config = JSON.parse(process.env.IDP_CONFIG_FILE
  ? readFileSync(process.env.IDP_CONFIG_FILE, 'utf8')
  : process.env.IDP_CONFIG || '{}');
const host = config.host || '127.0.0.1';
const resource = config.resource || 'urn:svc:e2e';
const ttl = config.ttl || 300;
const clients = config.clients || [];
const byClient = new Map(clients.map((c) => [c.client_id, c]));
// people are the users of a sign-in page, by name; byEmail finds a
// signed-in person by account id (the email).
const people = config.users_file
  ? JSON.parse(readFileSync(resolve(process.env.IDP_CONFIG_FILE ? dirname(process.env.IDP_CONFIG_FILE) : '.', config.users_file), 'utf8'))
  : null;
const byEmail = new Map(Object.values(people || {}).map((u) => [u.email, u]));

const generate = promisify(generateKeyPair);

// newKey returns a fresh 2048-bit RSA private JWK for RS256 signatures.
async function newKey() {
  const { privateKey } = await generate('rsa', { modulusLength: 2048 });
  return {
    ...privateKey.export({ format: 'jwk' }),
    kid: randomUUID(),
    alg: 'RS256',
    use: 'sig',
  };
}

// RSA key generation can take seconds on a busy machine, so the key of the
// next rotation is always being made in advance.
let spare = newKey();
async function takeKey() {
  const key = await spare;
  spare = newKey();
  return key;
}

// grants counts the token endpoint's answers by grant type and outcome.
const grants = {};
function countGrant(ctx, outcome) {
  const type = ctx.oidc?.params?.grant_type || 'unknown';
  grants[type] ||= { success: 0, error: 0 };
  grants[type][outcome] += 1;
}

// keys holds the published signing keys, the current one first.
let keys = [await takeKey()];
let provider;

function buildProvider(issuer) {
  const signingKid = keys[0].kid;
  const p = new Provider(issuer, {
    clients: clients.map((c) => (c.redirect_uris ? {
      client_id: c.client_id,
      client_secret: c.client_secret,
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: c.redirect_uris,
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      ...(c.backchannel_logout_uri ? { backchannel_logout_uri: c.backchannel_logout_uri, backchannel_logout_session_required: true } : {}),
    } : {
      client_id: c.client_id,
      client_secret: c.client_secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    cookies: { keys: ['svc-e2e-cookie-key-0123456789'] },
    // Back-channel logout tokens go to the sidecar on loopback, which the
    // provider's SSRF guard (its own dispatcher) refuses: plain fetch.
    fetch: (url, options) => {
      delete options.dispatcher;
      return fetch(url, options);
    },
    conformIdTokenClaims: false,
    claims: { openid: ['sub', 'tenant_id', 'roles'], email: ['email'], profile: [] },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx, id) {
      const u = byEmail.get(id);
      if (u) {
        return {
          accountId: id,
          async claims() {
            const out = { sub: id, email: u.email, roles: u.roles || [] };
            if (u.tenant) out.tenant_id = u.tenant;
            return out;
          },
        };
      }
      const c = byClient.get(id);
      if (!c) return undefined;
      return {
        accountId: id,
        async claims() {
          const out = { sub: id };
          if (c.tenant_id !== undefined) out.tenant_id = c.tenant_id;
          if (c.roles !== undefined) out.roles = c.roles;
          if (c.email !== undefined) out.email = c.email;
          return out;
        },
      };
    },
    jwks: { keys },
    ttl: { ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL || ttl },
    features: {
      clientCredentials: { enabled: true },
      devInteractions: { enabled: false },
      backchannelLogout: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo(_ctx, indicator, client) {
          if (indicator !== resource) {
            throw new Provider.errors.InvalidTarget();
          }
          return {
            scope: 'api',
            audience: resource,
            accessTokenTTL: ttl,
            accessTokenFormat: byClient.get(client?.clientId)?.opaque ? 'opaque' : 'jwt',
            jwt: { sign: { alg: 'RS256', kid: signingKid } },
          };
        },
      },
    },
    async extraTokenClaims(_ctx, token) {
      const c = byClient.get(token.clientId);
      if (!c) return undefined;
      const extra = {};
      // A JWT carries the client id as sub; an opaque token's
      // introspection answer has none of its own for this grant.
      if (c.opaque) extra.sub = c.client_id;
      if (c.tenant_id !== undefined) extra.tenant_id = c.tenant_id;
      if (c.roles !== undefined) extra.roles = c.roles;
      if (c.email !== undefined) extra.email = c.email;
      return extra;
    },
  });
  // Plain http on loopback: tell koa it is not behind a proxy.
  p.proxy = false;
  p.on('grant.success', (ctx) => countGrant(ctx, 'success'));
  p.on('grant.error', (ctx) => countGrant(ctx, 'error'));
  p.on('backchannel.error', (_ctx, err, client) => {
    process.stderr.write(`backchannel logout to ${client?.clientId} failed: ${err} ${err?.cause}\n`);
  });
  return p;
}

function publicKids() {
  return keys.map((k) => k.kid);
}

function writeJSON(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

const server = createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (url.pathname === '/_admin/rotate') {
    if (req.method !== 'POST') {
      writeJSON(res, 405, { error: 'method not allowed' });
      return;
    }
    takeKey().then((fresh) => {
      keys = url.searchParams.get('retire') === '1' ? [fresh] : [fresh, ...keys];
      provider = buildProvider(provider.issuer);
      writeJSON(res, 200, { kid: fresh.kid, kids: publicKids() });
    }, (err) => writeJSON(res, 500, { error: String(err) }));
    return;
  }
  if (url.pathname === '/_admin/grants') {
    writeJSON(res, 200, grants);
    return;
  }
  if (url.pathname.startsWith('/interaction/')) {
    (people ? signInPerson(req, res) : signInAtOnce(req, res)).catch((err) => writeJSON(res, 500, { error: String(err) }));
    return;
  }
  const prompt = url.searchParams.get('prompt') || '';
  if (people && url.pathname === '/auth' && !prompt.split(' ').includes('login')) {
    // No sign-in session is reused: every sign-in asks who signs in.
    url.searchParams.set('prompt', prompt ? prompt + ' login' : 'login');
    req.url = url.pathname + url.search;
  }
  provider.callback()(req, res);
});

function htmlEscape(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// signInPerson answers a sign-in's login with the "Sign in as" page
// (GET) and signs in the person picked on it (POST user=<name>); the
// consent that follows is granted without a page.
async function signInPerson(req, res) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name !== 'login') {
    await signInAtOnce(req, res);
    return;
  }
  if (req.method === 'POST') {
    let body = '';
    for await (const chunk of req) body += chunk;
    const name = new URLSearchParams(body).get('user');
    const person = Object.hasOwn(people, name || '') ? people[name] : undefined;
    if (!person) {
      writeJSON(res, 400, { error: `no user ${JSON.stringify(name)}` });
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: person.email, remember: false } }, { mergeWithLastSubmission: false });
    return;
  }
  const rows = Object.entries(people)
    .map(([name, u]) => `<li><button type="submit" name="user" value="${htmlEscape(name)}">${htmlEscape(name)}</button>
<span>${htmlEscape(u.email)} · tenant ${htmlEscape(u.tenant || '(none)')} · ${htmlEscape((u.roles || []).join(', '))}</span></li>`)
    .join('\n');
  res.writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    // No form-action: the sign-in's redirects after the post lead to
    // the relying party, which form-action would block.
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
  });
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Demo OpenID provider: sign in</title>
<style>body{font-family:sans-serif;max-width:40em;margin:3em auto}li{margin:.6em 0;list-style:none}button{min-width:6em;margin-right:1em}</style>
</head><body><h1>Sign in as</h1><p>The demo OpenID provider asks for no password: pick a demo user.</p>
<form method="post" action="/interaction/${htmlEscape(details.uid)}">
<ul>
${rows}
</ul></form></body></html>`);
}

// signInAtOnce completes a sign-in's interaction without a page: the
// account named like the client signs in and grants what is asked.
async function signInAtOnce(req, res) {
  const details = await provider.interactionDetails(req, res);
  const clientId = details.params.client_id;
  if (details.prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: clientId } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId });
  const missing = details.prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

server.listen(config.port || 0, host, () => {
  const { port } = server.address();
  const local = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
  const issuer = config.issuer || local;
  provider = buildProvider(issuer);
  // The endpoints where this process listens, which differ from the
  // issuer's when a port is published under another name.
  process.stdout.write(`${JSON.stringify({
    issuer,
    token_endpoint: `${local}/token`,
    jwks_uri: `${local}/jwks`,
    introspection_endpoint: `${local}/token/introspection`,
    kid: keys[0].kid,
  })}\n`);
});

function shutdown() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
