"""SAML sign-on through the sidecar's SAML gateway.

The gateway (its own listener, default ``http://127.0.0.1:7701``, endpoints
under ``/auth/saml``) signs a browser in at the identity provider and sets
the session cookie (``sdk.session.cookie_name``, older name
``sdk.saml.cookie_name``, default ``svc_session``; ``__Host-svc_session``
wherever the gateway's cookies are Secure) holding a short-lived token that
the sidecar verifies; its OpenID Connect gateway (``[sdk.oidc]``) sets the
same cookie. The Flask, FastAPI and Django middleware read that cookie when
a request has no ``Authorization`` header (only ``__Host-<cookie_name>``
behind Secure gateways, see :attr:`SamlConfig.prefixed_only`), and, with
``login_redirect`` on, send a browser without a valid session to
``/auth/saml/login?return_to=<its path>``::

    from svc_sdk.saml import SamlConfig, login_url, wants_login_redirect
    saml = SamlConfig.load()          # SVC_*, then svc.toml [sdk.saml], [sdk.session], [sdk.oidc], then the defaults
    login_url("/orders?page=2", saml) # "/auth/saml/login?return_to=%2Forders%3Fpage%3D2"

Only browsers are redirected: a GET or HEAD whose Accept prefers
``text/html`` and that carries no Authorization header (the sidecar's own
``browser_redirect`` rule); API clients get the 401.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from .client import DEFAULT_CONFIG_FILE, load_toml

__all__ = [
    "SamlConfig", "AttributeMapping", "DEFAULT_COOKIE", "HOST_COOKIE_PREFIX", "DEFAULT_PREFIX", "DEFAULT_GATEWAY_URL",
    "DEFAULT_CLOCK_SKEW_SECONDS", "DEFAULT_EMAIL_ATTRIBUTE", "login_url", "safe_return_to",
    "session_token", "cookie_value", "secure_cookies", "prefers_html", "wants_login_redirect", "login_redirect_url",
]

#: The gateway's default session cookie.
DEFAULT_COOKIE = "svc_session"
#: The prefix of the gateway's cookies wherever they are Secure
#: (``__Host-svc_session``); see :func:`session_token`.
HOST_COOKIE_PREFIX = "__Host-"
#: The gateway's default path prefix.
DEFAULT_PREFIX = "/auth/saml"
#: The gateway's default listen address, as a URL.
DEFAULT_GATEWAY_URL = "http://127.0.0.1:7701"
#: The gateway's default clock skew tolerance, in seconds.
DEFAULT_CLOCK_SKEW_SECONDS = 30
#: The SAML attribute that fills the email claim by default.
DEFAULT_EMAIL_ATTRIBUTE = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress"


@dataclass(frozen=True)
class AttributeMapping:
    """Which SAML attribute fills each JWT claim (``sdk.saml.attribute_mapping``)."""

    email: str = DEFAULT_EMAIL_ATTRIBUTE
    role: str = "role"
    #: Fills the tenant_id claim.
    tenant: str = "tenant_id"


@dataclass(frozen=True)
class SamlConfig:
    """The ``[sdk.saml]`` settings (spec SamlConfig) in snake_case, plus
    where the SDK reaches the gateway.

    ``sp_private_key_pem`` comes from ``SVC_SAML_SP_PRIVATE_KEY_PEM`` only
    (never from a file) and is left out of ``repr``.
    """

    #: SP entity id; equals the audience configured at the IdP.
    entity_id: str = ""
    #: Assertion consumer service URL; equals the reply URL at the IdP.
    acs_url: str = ""
    #: The identity provider's metadata URL.
    idp_metadata_url: str = ""
    #: Tolerated clock difference during assertion validation, seconds.
    clock_skew_seconds: int = DEFAULT_CLOCK_SKEW_SECONDS
    attribute_mapping: AttributeMapping = field(default_factory=AttributeMapping)
    #: SP private key (PEM), from the environment only; never printed.
    sp_private_key_pem: str | None = field(default=None, repr=False)
    #: SP certificate (PEM).
    sp_certificate_pem: str | None = None
    #: The session cookie the sign-in gateways set, read by the middleware
    #: (``sdk.session.cookie_name``, or its older name
    #: ``sdk.saml.cookie_name``).
    cookie_name: str = DEFAULT_COOKIE
    #: Path prefix of the gateway's endpoints.
    path_prefix: str = DEFAULT_PREFIX
    #: Origin of the gateway as the browser reaches it, prefixed to the login
    #: URL; "" (the default) keeps it relative: the same origin, through the
    #: proxy that routes ``path_prefix`` to the gateway.
    login_base_url: str = ""
    #: The gateway's URL for server-side calls (``SVC_SAML_URL``).
    gateway_url: str = DEFAULT_GATEWAY_URL
    #: The public URL (``redirect_url``) of each OpenID Connect provider
    #: the sidecar signs browsers in with, beside the SAML gateway: its
    #: OpenID Connect gateway sets the same session cookie, named as the
    #: SAML gateway names it. Empty when there is none.
    oidc_redirect_urls: tuple[str, ...] = ()

    @property
    def prefixed_only(self) -> bool:
        """Whether the middleware reads only ``__Host-<cookie_name>``: the
        sign-in gateways' public URLs (``acs_url`` and
        ``oidc_redirect_urls``, those that are set) are known and on every
        one the gateway's cookies are Secure (:func:`secure_cookies`), the
        sidecar's rule. The gateways then set no other session cookie, so
        an unprefixed one can only be one that a sibling subdomain tossed
        in for the parent domain (session fixation). When one is on plain
        http on loopback, or none is known (the gateways' settings are
        not), the unprefixed cookie is read too."""
        urls = [u for u in (self.acs_url, *self.oidc_redirect_urls) if u]
        return bool(urls) and all(secure_cookies(u) for u in urls)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, config_file: str | None = DEFAULT_CONFIG_FILE,
             **given: Any) -> "SamlConfig":
        """The settings: each field from ``given``, else its ``SVC_SAML_*``
        variable (``SVC_SAML_ENTITY_ID``, ``SVC_SAML_ACS_URL``,
        ``SVC_SAML_IDP_METADATA_URL``, ``SVC_SAML_CLOCK_SKEW_SECONDS``,
        ``SVC_SAML_ATTRIBUTE_EMAIL``/``_ROLE``/``_TENANT``,
        ``SVC_SAML_PATH_PREFIX``, ``SVC_SAML_LOGIN_BASE_URL``,
        ``SVC_SAML_URL``), else the key of ``[sdk.saml]`` in
        ``config_file`` (None: no file; a missing file is no error), else
        the sidecar's default. A value of the wrong type is a ValueError
        naming the key.

        ``cookie_name`` is the sidecar's session cookie, whichever gateway
        signs in: ``SVC_SESSION_COOKIE_NAME``, else
        ``SVC_SAML_COOKIE_NAME``, else ``cookie_name`` of
        ``[sdk.session]``, else that of ``[sdk.saml]`` (its older name),
        else ``svc_session``. ``oidc_redirect_urls`` are those of the
        OpenID Connect gateway: ``SVC_OIDC_REDIRECT_URL``, else
        ``[sdk.oidc] redirect_url``, when ``SVC_OIDC_ISSUER_URL`` or
        ``[sdk.oidc] issuer_url`` is set, and ``redirect_url`` of each
        ``[[sdk.oidc.providers]]`` entry, whose default is the former."""
        unknown = set(given) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"SamlConfig has no field {', '.join(sorted(unknown))}")
        env_: Mapping[str, str] = os.environ if env is None else env
        table: dict[str, Any] = {}
        session: dict[str, Any] = {}
        oidc: dict[str, Any] = {}
        if config_file:
            sdk = load_toml(config_file).get("sdk", {})
            if not isinstance(sdk, dict):
                raise ValueError(f"{config_file}: sdk must be a table")
            for name in ("saml", "session", "oidc"):
                if not isinstance(sdk.get(name, {}), dict):
                    raise ValueError(f"{config_file}: sdk.{name} must be a table")
            table, session, oidc = sdk.get("saml", {}), sdk.get("session", {}), sdk.get("oidc", {})

        def pick(name: str, var: str, default: str, tbl: Mapping[str, Any] = table, key: str = "") -> str:
            if given.get(name):
                return str(given[name])
            if env_.get(var):
                return env_[var]
            return _string(tbl, "sdk.saml", key or name, config_file) or default

        mapping = table.get("attribute_mapping", {})
        if not isinstance(mapping, dict):
            raise ValueError(f"{config_file}: sdk.saml.attribute_mapping must be a table")
        am = given.get("attribute_mapping") or AttributeMapping(
            email=_pick_map(mapping, "email", env_.get("SVC_SAML_ATTRIBUTE_EMAIL"), DEFAULT_EMAIL_ATTRIBUTE, config_file),
            role=_pick_map(mapping, "role", env_.get("SVC_SAML_ATTRIBUTE_ROLE"), "role", config_file),
            tenant=_pick_map(mapping, "tenant", env_.get("SVC_SAML_ATTRIBUTE_TENANT"), "tenant_id", config_file))
        if not isinstance(am, AttributeMapping):
            raise ValueError("attribute_mapping must be an AttributeMapping")

        skew: Any = given.get("clock_skew_seconds")
        if skew is None and env_.get("SVC_SAML_CLOCK_SKEW_SECONDS"):
            raw = env_["SVC_SAML_CLOCK_SKEW_SECONDS"].strip()
            if not re.fullmatch(r"\d{1,9}", raw):
                raise ValueError(f"SVC_SAML_CLOCK_SKEW_SECONDS={raw!r} is not a number of seconds")
            skew = int(raw)
        if skew is None and "clock_skew_seconds" in table:
            skew = table["clock_skew_seconds"]
            if not isinstance(skew, int) or isinstance(skew, bool):
                raise ValueError(f"{config_file}: sdk.saml.clock_skew_seconds must be an integer")
        if skew is not None and (not isinstance(skew, int) or isinstance(skew, bool) or skew < 0):
            raise ValueError(f"clock_skew_seconds must be a non-negative integer, not {skew!r}")

        return cls(
            entity_id=pick("entity_id", "SVC_SAML_ENTITY_ID", ""),
            acs_url=pick("acs_url", "SVC_SAML_ACS_URL", ""),
            idp_metadata_url=pick("idp_metadata_url", "SVC_SAML_IDP_METADATA_URL", ""),
            clock_skew_seconds=skew or DEFAULT_CLOCK_SKEW_SECONDS,
            attribute_mapping=am,
            # Key material never comes from the file.
            sp_private_key_pem=given.get("sp_private_key_pem") or env_.get("SVC_SAML_SP_PRIVATE_KEY_PEM") or None,
            sp_certificate_pem=given.get("sp_certificate_pem") or env_.get("SVC_SAML_SP_CERTIFICATE_PEM") or None,
            cookie_name=(str(given.get("cookie_name") or "") or env_.get("SVC_SESSION_COOKIE_NAME")
                         or env_.get("SVC_SAML_COOKIE_NAME") or _string(session, "sdk.session", "cookie_name", config_file)
                         or _string(table, "sdk.saml", "cookie_name", config_file) or DEFAULT_COOKIE),
            path_prefix=pick("path_prefix", "SVC_SAML_PATH_PREFIX", DEFAULT_PREFIX).rstrip("/"),
            login_base_url=pick("login_base_url", "SVC_SAML_LOGIN_BASE_URL", "", {}).rstrip("/"),
            gateway_url=pick("gateway_url", "SVC_SAML_URL", DEFAULT_GATEWAY_URL, {}).rstrip("/"),
            oidc_redirect_urls=(tuple(given["oidc_redirect_urls"]) if "oidc_redirect_urls" in given
                                else _oidc_redirect_urls(env_, oidc, config_file)),
        )


def _string(table: Mapping[str, Any], where: str, key: str, config_file: str | None) -> str:
    """The string ``key`` of ``table`` (``where`` in ``config_file``), or
    "" when it is missing; another type is a ValueError naming it."""
    v = table.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ValueError(f"{config_file}: {where}.{key} must be a string")
    return v


def _oidc_redirect_urls(env: Mapping[str, str], oidc: Mapping[str, Any], config_file: str | None) -> tuple[str, ...]:
    """The redirect_url of each OpenID Connect provider, as the sidecar
    lists them ([sdk.oidc]'s own when it has an issuer_url, then each
    [[sdk.oidc.providers]] entry, which defaults to the former); those not
    set are left out."""
    redirect = env.get("SVC_OIDC_REDIRECT_URL") or _string(oidc, "sdk.oidc", "redirect_url", config_file)
    urls = []
    if env.get("SVC_OIDC_ISSUER_URL") or _string(oidc, "sdk.oidc", "issuer_url", config_file):
        urls.append(redirect)
    providers = oidc.get("providers", [])
    if not isinstance(providers, list) or not all(isinstance(p, dict) for p in providers):
        raise ValueError(f"{config_file}: sdk.oidc.providers must be an array of tables")
    for p in providers:
        urls.append(_string(p, "sdk.oidc.providers", "redirect_url", config_file) or redirect)
    return tuple(u for u in urls if u)


def _pick_map(mapping: Mapping[str, Any], key: str, env_value: str | None, default: str,
              config_file: str | None) -> str:
    if env_value:
        return env_value
    v = mapping.get(key)
    if v is None or v == "":
        return default
    if not isinstance(v, str):
        raise ValueError(f"{config_file}: sdk.saml.attribute_mapping.{key} must be a string")
    return v


def safe_return_to(return_to: str | None) -> str:
    """``return_to`` when it is a relative path on this site
    (``/app?x=1``), else ``/``: never a URL a browser would resolve to
    another origin."""
    s = return_to or ""
    if not s.startswith("/") or s.startswith(("//", "/\\")) or len(s) > 2048:
        return "/"
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in s):
        return "/"
    return s


def login_url(return_to: str = "/", saml: SamlConfig | None = None) -> str:
    """The URL that starts SP-initiated sign-on and brings the browser back
    to ``return_to`` (replaced by ``/`` unless it is a relative path on this
    site)."""
    saml = saml or SamlConfig()
    q = urllib.parse.quote(safe_return_to(return_to), safe="")
    return f"{saml.login_base_url.rstrip('/')}{saml.path_prefix.rstrip('/')}/login?return_to={q}"


def cookie_value(cookie_header: str | None, name: str) -> str:
    """The value of cookie ``name`` in a Cookie header, or ""."""
    if not cookie_header or not name:
        return ""
    for part in cookie_header.split(";"):
        k, sep, v = part.strip().partition("=")
        if sep and k.strip() == name:
            v = v.strip()
            if len(v) >= 2 and v[0] == v[-1] == '"':
                v = v[1:-1]
            return urllib.parse.unquote(v)
    return ""


def secure_cookies(url: str) -> bool:
    """Whether the cookies of a gateway whose public URL is ``url`` (its
    ``acs_url``) are Secure, and so named ``__Host-<name>``: everywhere
    but plain http on a loopback host (localhost, 127.0.0.0/8, ::1), the
    sidecar's rule. A URL that does not parse counts as Secure: the
    sidecar refuses it."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return True
    return not (parts.scheme == "http" and _loopback(host))


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id is not None:  # the sidecar reads no zone: not an address
            return False
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def session_token(cookie_header: str | None, name: str = DEFAULT_COOKIE, prefixed_only: bool = False) -> str:
    """The gateway's session token in a Cookie header, or "": the cookie
    ``__Host-<name>`` when the header has it, else, unless
    ``prefixed_only``, ``<name>``.

    Wherever its cookies are Secure the gateway names the session cookie
    ``__Host-<name>``, which only the host itself can set; an unprefixed
    cookie of the same name, which a sibling subdomain can toss in,
    never displaces it, wherever it stands in the header. Alone it would
    still sign a browser without a session of its own in as whoever it
    names: ``prefixed_only`` (:attr:`SamlConfig.prefixed_only` behind a
    Secure gateway) leaves it unread. ``name`` is ``sdk.saml.cookie_name``,
    unprefixed."""
    if not cookie_header or not name:
        return ""
    prefixed = HOST_COOKIE_PREFIX + name
    if prefixed_only or any(part.strip().partition("=")[0].strip() == prefixed for part in cookie_header.split(";")):
        return cookie_value(cookie_header, prefixed)
    return cookie_value(cookie_header, name)


def _q(value: str) -> float:
    try:
        f = float(value.strip())
    except ValueError:
        return 0.0
    return f if 0 <= f <= 1 else 0.0


def prefers_html(accept: str | None) -> bool:
    """Whether an Accept header names text/html with a quality at least that
    of application/json (by its most specific matching range): a browser,
    by the sidecar's rule."""
    html = json = 0.0
    spec = 0  # 3 application/json, 2 application/*, 1 */*
    for part in (accept or "").split(","):
        mt, _, params = part.partition(";")
        mt = mt.strip().lower()
        q = 1.0
        for p in params.split(";"):
            k, sep, v = p.partition("=")
            if sep and k.strip().lower() == "q":
                q = _q(v)
                break
        rank = {"application/json": 3, "application/*": 2, "*/*": 1}.get(mt, 0)
        if mt == "text/html":
            html = max(html, q)
        elif rank > spec:
            spec, json = rank, q
        elif rank and rank == spec:
            json = max(json, q)
    return html > 0 and html >= json


def wants_login_redirect(method: str | None, accept: str | None, authorization: str | None) -> bool:
    """Whether a refused request is a browser's to send to sign in: a GET
    or HEAD preferring text/html without an Authorization header (which a
    browser does not send on its own)."""
    return (method or "").upper() in ("GET", "HEAD") and not authorization and prefers_html(accept)


def login_redirect_url(status: int, method: str | None, accept: str | None, authorization: str | None,
                       target: str, saml: SamlConfig | None = None) -> str | None:
    """The login URL to redirect a refused request to, or None: only a 401
    (no session, or an invalid or expired one; never a policy denial nor an
    unavailable sidecar) of a browser (:func:`wants_login_redirect`).
    ``target`` is the request's path and query, the return path."""
    if status != 401 or not wants_login_redirect(method, accept, authorization):
        return None
    return login_url(target, saml)
