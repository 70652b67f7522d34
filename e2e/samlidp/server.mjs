// A SAML 2.0 identity provider for svc's end-to-end tests and demos, built
// on samlify. It signs the assertions it issues with the key pair it is
// given, and signs in one of its demo users without asking for a password.
//
//   node e2e/samlidp/server.mjs --key idp-key.pem --cert idp-cert.pem \
//     --sp-metadata http://127.0.0.1:7701/auth/saml/metadata [--port 7710]
//
// Options (each also an environment variable):
//   --port / SAMLIDP_PORT            listen port on 127.0.0.1 (default 0: any free port)
//   --host / SAMLIDP_HOST            listen address (default 127.0.0.1)
//   --key / SAMLIDP_KEY_FILE         PEM private key (RSA) signing the assertions
//   --cert / SAMLIDP_CERT_FILE       PEM certificate of that key, published in the metadata
//   --sp-metadata / SAMLIDP_SP_METADATA  URL or file of the SP metadata (svc's /auth/saml/metadata)
//   --entity-id / SAMLIDP_ENTITY_ID  the IdP's entity id (default http://HOST:PORT/metadata)
//   --base-url / SAMLIDP_BASE_URL    URL the IdP is reached at (default http://HOST:PORT)
//   --user / SAMLIDP_DEFAULT_USER    demo user signed in when none is named (default alice)
//   --users / SAMLIDP_USERS_FILE     JSON file of users replacing the built-in ones, each
//                                    {"email", "roles": [...], "tenant", "department"}
//   --encrypt / SAMLIDP_ENCRYPT      encrypt the assertion for the SP's certificate: "gcm"
//                                    (RSA-OAEP and AES-256-GCM, what svc accepts) or "cbc"
//                                    (RSA-OAEP and AES-256-CBC, samlify's default, which svc
//                                    refuses); default none
//
// A key pair: `core saml test-assertion --metadata` creates one in its
// --idp-dir (idp-key.pem, idp-cert.pem), or
//   openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=idp \
//     -keyout idp-key.pem -out idp-cert.pem
//
// Endpoints:
//   GET /metadata                 the IdP metadata (give it to svc as sdk.saml.idp_metadata_url)
//   GET /sso?SAMLRequest=...      SP-initiated sign-on (HTTP-Redirect binding); &user=<name>
//                                 picks the demo user. Answers an auto-submitting form that
//                                 POSTs the SAMLResponse to the SP's ACS, or with
//                                 Accept: application/json {"acs_url","SAMLResponse","RelayState"}.
//                                 Without &user=, a browser (Accept preferring text/html) gets
//                                 a sign-in page listing the demo users instead: picking one
//                                 asks /sso again with the same query and &user=<name>. Other
//                                 clients (curl's */*, JSON) get the default user.
//   GET /idp-initiated?user=<name>&relay_state=/path   an unsolicited response, same answers.
//   GET /users                    the demo users.
// It prints one line "samlidp listening on <base-url>" once it serves.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import * as samlify from 'samlify';

export const users = {
  alice: { email: 'alice@example.com', roles: ['admin'], tenant: 'acme', department: 'engineering' },
  bob: { email: 'bob@example.com', roles: ['viewer'], tenant: 'acme', department: 'sales' },
  carol: { email: 'carol@example.com', roles: ['billing', 'viewer'], tenant: 'globex', department: 'finance' },
  nora: { email: 'nora@example.com', roles: ['viewer'], tenant: '', department: 'none' }, // no tenant attribute
};

const EMAIL_ATTR = 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress';

const { values: opt } = parseArgs({
  options: {
    port: { type: 'string', default: process.env.SAMLIDP_PORT ?? '0' },
    host: { type: 'string', default: process.env.SAMLIDP_HOST ?? '127.0.0.1' },
    key: { type: 'string', default: process.env.SAMLIDP_KEY_FILE },
    cert: { type: 'string', default: process.env.SAMLIDP_CERT_FILE },
    'sp-metadata': { type: 'string', default: process.env.SAMLIDP_SP_METADATA },
    'entity-id': { type: 'string', default: process.env.SAMLIDP_ENTITY_ID },
    'base-url': { type: 'string', default: process.env.SAMLIDP_BASE_URL },
    user: { type: 'string', default: process.env.SAMLIDP_DEFAULT_USER ?? 'alice' },
    users: { type: 'string', default: process.env.SAMLIDP_USERS_FILE },
    encrypt: { type: 'string', default: process.env.SAMLIDP_ENCRYPT ?? '' },
  },
});
const dataEncryption = {
  gcm: 'http://www.w3.org/2009/xmlenc11#aes256-gcm',
  cbc: 'http://www.w3.org/2001/04/xmlenc#aes256-cbc',
}[opt.encrypt];
if (opt.encrypt && !dataEncryption) {
  console.error(`samlidp: --encrypt must be gcm or cbc, got ${opt.encrypt}`);
  process.exit(2);
}
const people = opt.users ? JSON.parse(readFileSync(opt.users, 'utf8')) : users;
for (const need of ['key', 'cert', 'sp-metadata']) {
  if (!opt[need]) {
    console.error(`samlidp: --${need} is required`);
    process.exit(2);
  }
}
const privateKey = readFileSync(opt.key, 'utf8');
const signingCert = readFileSync(opt.cert, 'utf8');

// AuthnRequests are not schema-checked here: this IdP trusts its SP, and
// the SP under test is what validates strictly.
samlify.setSchemaValidator({ validate: async () => 'skipped' });

const xmlEscape = (s) => String(s).replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]);

function attributeStatement(u) {
  const attrs = [[EMAIL_ATTR, [u.email]], ['role', u.roles], ['department', [u.department]]];
  if (u.tenant) attrs.push(['tenant_id', [u.tenant]]);
  const body = attrs
    .map(([name, vals]) => `<saml:Attribute Name="${xmlEscape(name)}" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:unspecified">${vals
      .map((v) => `<saml:AttributeValue xsi:type="xs:string">${xmlEscape(v)}</saml:AttributeValue>`)
      .join('')}</saml:Attribute>`)
    .join('');
  return `<saml:AttributeStatement>${body}</saml:AttributeStatement>`;
}

let idp;
let spCache;

async function serviceProvider() {
  if (spCache) return spCache;
  const src = opt['sp-metadata'];
  const xml = /^https?:/.test(src) ? await (await fetch(src)).text() : readFileSync(src, 'utf8');
  spCache = samlify.ServiceProvider({ metadata: xml });
  return spCache;
}

async function loginResponse(sp, user, inResponseTo) {
  const now = new Date();
  const later = new Date(now.getTime() + 5 * 60 * 1000);
  const acs = sp.entityMeta.getAssertionConsumerService('post');
  const acsURL = Array.isArray(acs) ? acs[0] : acs;
  const values = {
    ID: `_${randomUUID()}`,
    AssertionID: `_${randomUUID()}`,
    Destination: acsURL,
    Audience: sp.entityMeta.getEntityID(),
    SubjectRecipient: acsURL,
    Issuer: idp.entityMeta.getEntityID(),
    IssueInstant: now.toISOString(),
    StatusCode: 'urn:oasis:names:tc:SAML:2.0:status:Success',
    ConditionsNotBefore: new Date(now.getTime() - 60 * 1000).toISOString(),
    ConditionsNotOnOrAfter: later.toISOString(),
    SubjectConfirmationDataNotOnOrAfter: later.toISOString(),
    NameIDFormat: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
    NameID: user.email,
    InResponseTo: inResponseTo ?? '',
    AuthnStatement: `<saml:AuthnStatement AuthnInstant="${now.toISOString()}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>`,
  };
  const requestInfo = inResponseTo ? { extract: { request: { id: inResponseTo } } } : {};
  const res = await idp.createLoginResponse(sp, requestInfo, 'post', user, (template) => {
    let xml = template;
    for (const [k, v] of Object.entries(values)) {
      const text = k === 'AuthnStatement' ? v : xmlEscape(v);
      xml = xml.split(`{${k}}`).join(text);
    }
    xml = xml.split('{AttributeStatement}').join(attributeStatement(user));
    if (!inResponseTo) xml = xml.split(' InResponseTo=""').join('');
    return { id: values.ID, context: xml };
  });
  return { acsURL, samlResponse: res.context };
}

function answer(req, res, acsURL, samlResponse, relayState) {
  const accept = req.headers.accept ?? '';
  if (accept.includes('application/json') && !prefersHTML(accept)) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ acs_url: acsURL, SAMLResponse: samlResponse, RelayState: relayState ?? '' }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html><body onload="document.forms[0].submit()"><form method="post" action="${xmlEscape(acsURL)}">
<input type="hidden" name="SAMLResponse" value="${xmlEscape(samlResponse)}">
<input type="hidden" name="RelayState" value="${xmlEscape(relayState ?? '')}">
<noscript><button type="submit">Continue</button></noscript></form></body></html>`);
}

// prefersHTML reports whether an Accept header is a browser's: text/html
// listed with a quality at least that of application/json. A wildcard
// alone (curl's */*) or a missing header is not a browser.
function prefersHTML(accept) {
  let html = 0;
  let json = 0;
  for (const part of String(accept ?? '').split(',')) {
    const [type, ...params] = part.split(';').map((x) => x.trim().toLowerCase());
    let q = 1;
    for (const p of params) {
      const [k, v] = p.split('=').map((x) => x.trim());
      if (k === 'q') q = Number.isFinite(Number(v)) ? Number(v) : 0;
    }
    if (type === 'text/html') html = Math.max(html, q);
    if (type === 'application/json') json = Math.max(json, q);
  }
  return html > 0 && html >= json;
}

// chooseUser answers a browser's sign-on without &user= with a page that
// lists the demo users; each button asks /sso again with the same query
// (SAMLRequest, RelayState, signature if any) and the chosen user.
function chooseUser(res, url) {
  const hidden = [...url.searchParams]
    .filter(([k]) => k !== 'user')
    .map(([k, v]) => `<input type="hidden" name="${xmlEscape(k)}" value="${xmlEscape(v)}">`)
    .join('\n');
  const rows = Object.entries(people)
    .map(([name, u]) => `<li><button type="submit" name="user" value="${xmlEscape(name)}">${xmlEscape(name)}</button>
<span>${xmlEscape(u.email)} · tenant ${xmlEscape(u.tenant || '(none)')} · ${xmlEscape((u.roles ?? []).join(', '))}</span>${name === opt.user ? ' <em>(default)</em>' : ''}</li>`)
    .join('\n');
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Demo IdP: sign in</title>
<style>body{font-family:sans-serif;max-width:40em;margin:3em auto}li{margin:.6em 0;list-style:none}button{min-width:6em;margin-right:1em}</style>
</head><body><h1>Sign in as</h1><p>The demo identity provider asks for no password: pick a demo user.</p>
<form method="get" action="/sso">
${hidden}
<ul>
${rows}
</ul></form></body></html>`);
}

function fail(res, status, msg) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: msg }));
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url, opt['base-url'] ?? 'http://localhost');
  try {
    if (url.pathname === '/metadata') {
      res.writeHead(200, { 'content-type': 'application/samlmetadata+xml' });
      res.end(idp.getMetadata());
      return;
    }
    if (url.pathname === '/users') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(people));
      return;
    }
    const name = url.searchParams.get('user') ?? opt.user;
    const user = people[name];
    if (!user && (url.pathname === '/sso' || url.pathname === '/idp-initiated')) {
      fail(res, 404, `no demo user ${name}`);
      return;
    }
    if (url.pathname === '/sso') {
      const sp = await serviceProvider();
      const query = Object.fromEntries(url.searchParams);
      const { extract } = await idp.parseLoginRequest(sp, 'redirect', { query });
      if (!url.searchParams.has('user') && prefersHTML(req.headers.accept)) {
        chooseUser(res, url);
        return;
      }
      const { acsURL, samlResponse } = await loginResponse(sp, user, extract.request.id);
      answer(req, res, acsURL, samlResponse, query.RelayState);
      return;
    }
    if (url.pathname === '/idp-initiated') {
      const sp = await serviceProvider();
      const { acsURL, samlResponse } = await loginResponse(sp, user, null);
      answer(req, res, acsURL, samlResponse, url.searchParams.get('relay_state') ?? '/');
      return;
    }
    fail(res, 404, 'not found');
  } catch (err) {
    fail(res, 400, String(err?.message ?? err));
  }
});

server.listen(Number(opt.port), opt.host, () => {
  const { port } = server.address();
  const base = opt['base-url'] ?? `http://${opt.host}:${port}`;
  idp = samlify.IdentityProvider({
    entityID: opt['entity-id'] ?? `${base}/metadata`,
    privateKey,
    signingCert,
    wantAuthnRequestsSigned: false,
    requestSignatureAlgorithm: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
    nameIDFormat: ['urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress'],
    ...(dataEncryption && {
      isAssertionEncrypted: true,
      dataEncryptionAlgorithm: dataEncryption,
      keyEncryptionAlgorithm: 'http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p',
    }),
    singleSignOnService: [
      { Binding: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect', Location: `${base}/sso` },
    ],
  });
  console.log(`samlidp listening on ${base}`);
});

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
