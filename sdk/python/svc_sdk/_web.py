"""What every middleware does with a request, whatever the framework.

The framework modules only read the request and write the answer; the
decision and the status it maps to are chosen here, once:

    no bearer token or API key 401 token-missing, WWW-Authenticate: Bearer
    invalid token              401, WWW-Authenticate: Bearer error="invalid_token"
    invalid API key            401, WWW-Authenticate: ApiKey error="invalid_key"
    token of another tenant    403 tenant-mismatch
    policy denies              403 with the deny reasons and decision id
    tenant rate-limited        429 with Retry-After
    sidecar unreachable        open: admitted, claims None, reason fail-open
                               closed: 503
    keys or policy unavailable 503
"""

from __future__ import annotations

import json
import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar, Union

from .client import Client, Decision, SidecarUnavailableError, SvcError, TokenDecision

_log = logging.getLogger("svc_sdk")

_T = TypeVar("_T")

# Reasons for which the token itself was refused: the client should get a
# new one (RFC 6750 invalid_token). The same as the sidecar's
# (reason/testdata/failures.json, which the tests compare).
TOKEN_FAILURES = frozenset({
    "token-malformed", "token-expired", "token-not-yet-valid", "token-issued-in-future", "token-bound",
    "signature-invalid", "unknown-kid", "alg-not-allowed", "key-too-weak", "tenant-missing",
    "issuer-mismatch", "issuer-unknown", "audience-mismatch", "typ-not-allowed", "token-inactive",
})

# Reasons for which an API key was refused: challenged in the key's own
# scheme (ApiKey error="invalid_key"), as the sidecar does.
API_KEY_FAILURES = frozenset({"api-key-malformed", "api-key-unknown", "api-key-revoked", "api-key-expired"})

# Reasons for which nothing could be said about the token.
UNDECIDED = frozenset({
    "jwks-unavailable", "introspection-unavailable", "introspection-invalid", "policy-error", "unavailable",
})


@dataclass(frozen=True)
class Admission:
    """A request let through. ``claims`` is the verified claim set, or None
    in development mode, on fail-open and on an excluded path."""

    claims: dict[str, Any] | None
    decision: Union[TokenDecision, Decision, None]


@dataclass(frozen=True)
class Refusal:
    """A request refused: the status, headers and JSON body to answer with."""

    status: int
    reason: str
    deny_reasons: list[str] = field(default_factory=list)
    decision_id: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"allow": False, "deny_reasons": list(self.deny_reasons), "reason": self.reason}
        if self.decision_id:
            body["decision_id"] = self.decision_id
        return body

    def body(self) -> bytes:
        return json.dumps(self.payload(), separators=(",", ":")).encode() + b"\n"

    def all_headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff", **self.headers}


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (scheme
    case-insensitive), or ""."""
    if not authorization:
        return ""
    scheme, _, tok = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return ""
    return tok.strip()


def api_key(authorization: str | None, x_api_key: str | None = None) -> str:
    """The API key a request presents, by the rule of the sidecar's checks:
    the credential of an ``Authorization: ApiKey <key>`` header (scheme
    case-insensitive), else, when the request has no Authorization header
    at all (``authorization`` None), its X-Api-Key header; "" when it
    presents none. Another Authorization scheme (a bearer token) decides:
    X-Api-Key beside it is not read."""
    if authorization is None:
        return (x_api_key or "").strip()
    v = authorization.strip()
    if len(v) <= 6 or v[:6].lower() != "apikey" or v[6] not in " \t":
        return ""
    return v[7:].strip()


def excluded(path: str, exclude: Iterable[str]) -> bool:
    """Whether ``path`` is exempt: an entry matches the path exactly, or,
    when it ends with ``*``, every path starting with what precedes it."""
    for e in exclude:
        if e.endswith("*"):
            if path.startswith(e[:-1]):
                return True
        elif path == e:
            return True
    return False


def request_token(authorization: str | None, session: str = "", x_api_key: str | None = None) -> str:
    """The request's credential: the bearer token of its Authorization
    header, else its API key (:func:`api_key`; ``x_api_key`` is the
    X-Api-Key header), else, when it has no Authorization header at all,
    ``session`` (the SAML gateway's session cookie), as the sidecar reads
    them. The sidecar takes a key where it takes a token: a key starts
    ``svck_``, which no token does."""
    tok = bearer_token(authorization) or api_key(authorization, x_api_key)
    if tok or authorization:
        return tok
    return session


def check_token(client: Client, authorization: str | None, session: str = "",
                x_api_key: str | None = None) -> Admission | Refusal:
    """Validates the request's bearer token or API key, or its session
    cookie's (``session``) when it has neither and no Authorization
    header (:func:`request_token`); no policy evaluation."""
    tok = request_token(authorization, session, x_api_key)
    if not tok:
        return _challenge("token-missing")
    try:
        d = client.validate_token(tok)
    except SvcError as e:
        return _failed(e, "validate-token")
    if d.allowed:
        return Admission(d.claims, d)
    return refusal_of(d.reason)


def check_action(client: Client, authorization: str | None, action: str, resource: str | None = None,
                 resource_id: str | None = None, request: dict[str, Any] | None = None,
                 session: str = "", x_api_key: str | None = None) -> Admission | Refusal:
    """Validates the bearer token or API key (or ``session``, as
    :func:`check_token`) and authorizes ``action`` by the policy."""
    tok = request_token(authorization, session, x_api_key)
    if not tok:
        return _challenge("token-missing")
    try:
        d = client.authorize(tok, action, resource, resource_id, request=request)
    except SvcError as e:
        return _failed(e, "authorize")
    if d.allow:
        return Admission(d.claims, d)
    return refusal_of(d.reason, d.deny_reasons, d.decision_id, d.retry_after)


def refusal_of(reason: str, deny_reasons: list[str] | None = None, decision_id: str = "",
               retry_after: float | None = None) -> Refusal:
    """Maps a refused decision to its answer."""
    reasons = list(deny_reasons or [])
    if reason == "rate-limited":
        secs = max(1, math.ceil(retry_after or 1))
        return Refusal(429, reason, reasons, decision_id, {"Retry-After": str(secs)})
    if reason in UNDECIDED:
        return Refusal(503, reason, reasons, decision_id)
    if reason == "token-missing":
        return Refusal(401, reason, reasons, decision_id, {"WWW-Authenticate": "Bearer"})
    if reason in TOKEN_FAILURES:
        return Refusal(401, reason, reasons, decision_id, {
            "WWW-Authenticate": f'Bearer error="invalid_token", error_description="{reason}"'})
    if reason in API_KEY_FAILURES:
        return Refusal(401, reason, reasons, decision_id, {
            "WWW-Authenticate": f'ApiKey error="invalid_key", error_description="{reason}"'})
    # policy-deny, tenant-mismatch (an authentic token of another tenant)
    # and anything newer: forbidden.
    return Refusal(403, reason, reasons, decision_id)


def _challenge(reason: str) -> Refusal:
    return Refusal(401, reason, [], "", {"WWW-Authenticate": "Bearer"})


def _failed(e: SvcError, op: str) -> Refusal:
    if isinstance(e, SidecarUnavailableError):
        return Refusal(503, e.reason if e.reason not in ("", "fail-open") else "unavailable")
    # The route's own configuration or the sidecar URL is wrong: the
    # server's fault, not the caller's.
    _log.error("svc %s failed: %s (reason=%s)", op, e, e.reason)
    return Refusal(500, e.reason or "policy-error")


def login_redirect(r: Refusal, location: str) -> Refusal:
    """The 302 that sends a refused browser to sign in instead of ``r``;
    ``r`` itself for a refused API key, which no browser sends on its own."""
    if r.reason in API_KEY_FAILURES:
        return r
    return Refusal(302, r.reason, [], "", {"Location": location})


def once(make: Callable[[], _T]) -> Callable[[], _T]:
    """A function that calls ``make`` on its first call only, under a lock
    (concurrent first calls wait for the one value), and returns that value
    from then on: a framework module's default client or settings, made
    when a request first needs them."""
    lock = threading.Lock()
    made: list[_T] = []

    def get() -> _T:
        with lock:
            if not made:
                made.append(make())
            return made[0]

    return get
