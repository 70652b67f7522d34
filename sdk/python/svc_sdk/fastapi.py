"""FastAPI (Starlette, any ASGI app) middleware and dependency.

    from fastapi import Depends, FastAPI, Request
    from svc_sdk import Client, Decision
    from svc_sdk.fastapi import SvcMiddleware, require_action

    app = FastAPI()
    app.add_middleware(SvcMiddleware, client=Client(), exclude=("/healthz",))

    @app.get("/orders/{order_id}")
    async def order(order_id: str, request: Request,
                    decision: Decision = Depends(require_action("orders:read", resource_id_param="order_id"))):
        return {"claims": request.state.svc_user}

An API key is read as the sidecar's checks read it: ``Authorization: ApiKey
<key>``, or ``X-Api-Key`` when the request has no Authorization header.
A request with neither an Authorization header nor an API key is
authenticated by the sign-in gateways' session cookie (``saml.cookie_name``,
default ``svc_session``): ``__Host-<cookie_name>``, else, unless
``prefixed_only`` (by default on behind Secure gateways, SAML ``acs_url``
and OpenID Connect ``oidc_redirect_urls``, see
:attr:`svc_sdk.saml.SamlConfig.prefixed_only`), ``<cookie_name>``.
With ``login_redirect=True``, a browser refused for its token (401; a GET or
HEAD preferring text/html, see :mod:`svc_sdk.saml`) is redirected (302) to
the gateway's login with its path as ``return_to``.

Behind a proxy checking with a sidecar that signs identity tokens,
``app.add_middleware(SvcMiddleware, identity=IdentityVerifier(...))``
admits a request on its ``X-Svc-Identity`` alone, without calling the
sidecar (see :mod:`svc_sdk.identity`); ``request.state.svc_decision`` is
then a TokenDecision with reason ``ok``.

``request.state.svc_user`` holds the verified claims (a dict), or None in
development mode, on fail-open and on excluded paths;
``request.state.svc_decision`` holds the whole TokenDecision or Decision.
WebSocket routes are checked as HTTP ones are, by their handshake's
headers (``websocket.state.svc_user``): a refused handshake is closed with
code 1008 before the route runs, which the server answers 403.
The sidecar is called on a worker thread (``asyncio.to_thread``) so the event
loop keeps serving other requests while a call is in flight.

Every refusal, the middleware's and ``require_action``'s alike, answers the
JSON body of the other SDKs' middleware,
``{"allow": false, "deny_reasons": [...], "reason": "...", "decision_id": "..."}``,
with the status and headers listed in :mod:`svc_sdk._web`. ``require_action``
raises :class:`SvcRefused`, which SvcMiddleware answers; an app that uses
``require_action`` without the middleware registers the answer itself with
``app.add_exception_handler(SvcRefused, refusal_handler)``.
"""

import asyncio
import logging
from typing import Any, Awaitable, Callable, Iterable, MutableMapping, Optional

from fastapi import HTTPException, Request
from starlette.responses import Response

from ._web import Refusal, check_action, check_token, excluded, login_redirect, once
from .client import Client, Decision
from .identity import IdentityVerifier, check_identity
from .saml import SamlConfig, login_redirect_url, session_token

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["SvcMiddleware", "require_action", "SvcRefused", "refusal_handler"]

_log = logging.getLogger("svc_sdk")


class SvcRefused(Exception):
    """Raised by ``require_action`` for a refused request; ``refusal``
    holds the status, headers and body to answer with. SvcMiddleware and
    :func:`refusal_handler` answer it."""

    def __init__(self, refusal: Refusal):
        super().__init__(f"svc refused the request: {refusal.status} {refusal.reason}")
        self.refusal = refusal


async def refusal_handler(request: Request, exc: SvcRefused) -> Response:
    """The answer to :class:`SvcRefused`, for apps that use
    ``require_action`` without SvcMiddleware:
    ``app.add_exception_handler(SvcRefused, refusal_handler)``."""
    r = exc.refusal
    return Response(r.body(), status_code=r.status, headers=r.all_headers())


class SvcMiddleware:
    """ASGI middleware validating the bearer token or API key of every HTTP
    request and WebSocket handshake but those whose path is in ``exclude``
    (exact paths, or prefixes ending with ``*``). A refused handshake is
    closed before the route runs (code 1008; the server answers it 403). Use it as ``app.add_middleware(SvcMiddleware, client=...)``;
    without ``client`` one is made from the environment and svc.toml (see
    :class:`~svc_sdk.Client`).

    With ``identity``, a request is admitted on its ``X-Svc-Identity``
    token alone (401 without one or with one that does not verify, 503
    ``jwks-unavailable`` while the verifier has no keys); the sidecar is
    not called, and ``require_action`` uses ``client`` if given, else a
    default Client().

    ``prefixed_only=True`` reads the session cookie only as
    ``__Host-<cookie_name>``, ``False`` also as ``<cookie_name>`` when the
    request has no prefixed one; None (the default) takes
    ``saml.prefixed_only``: prefixed only behind Secure gateways.
    ``require_action`` reads it as the middleware does."""

    def __init__(self, app: ASGIApp, client: Optional[Client] = None, exclude: Iterable[str] = (),
                 saml: Optional[SamlConfig] = None, login_redirect: bool = False,
                 identity: Optional[IdentityVerifier] = None, prefixed_only: Optional[bool] = None):
        self.app = app
        self.identity = identity
        self.client = client if client is not None or identity is not None else Client()
        self.exclude = tuple(exclude)
        self.saml = saml or SamlConfig.load()
        self.login_redirect = login_redirect
        self.prefixed_only = self.saml.prefixed_only if prefixed_only is None else prefixed_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            # lifespan: no request to check.
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["svc_client"] = self.client  # None with identity: require_action makes its own
        state["svc_saml"] = self.saml
        state["svc_prefixed_only"] = self.prefixed_only
        state["svc_login_redirect"] = self.login_redirect
        state["svc_user"] = None
        state["svc_decision"] = None
        if excluded(scope.get("path", ""), self.exclude):
            await self._call_app(scope, receive, send)
            return
        if self.identity is not None:
            out = await asyncio.to_thread(check_identity, self.identity, _header(scope, b"x-svc-identity"))
            if isinstance(out, Refusal):
                await _send_refusal(scope, send, out)
                return
            state["svc_user"] = out.claims
            state["svc_decision"] = out.decision
            await self._call_app(scope, receive, send)
            return
        assert self.client is not None  # made unless identity is set
        out = await asyncio.to_thread(check_token, self.client, _header(scope, b"authorization"),
                                      session_token(_header(scope, b"cookie"), self.saml.cookie_name,
                                                    self.prefixed_only),
                                      _header(scope, b"x-api-key"))
        if isinstance(out, Refusal):
            if scope["type"] == "http":
                out = _browser(scope, out, self.saml, self.login_redirect)
            await _send_refusal(scope, send, out)
            return
        state["svc_user"] = out.claims
        state["svc_decision"] = out.decision
        await self._call_app(scope, receive, send)

    async def _call_app(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A SvcRefused of require_action passes FastAPI's exception
        # handling (it is not an HTTPException) and is answered here.
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except SvcRefused as e:
            if started:
                raise
            await _send_refusal(scope, send, e.refusal)


def require_action(action: str, resource: Optional[str] = None, resource_id_param: Optional[str] = None,
                   client: Optional[Client] = None) -> Callable[[Request], Awaitable[Decision]]:
    """A dependency that authorizes ``action`` by the policy, on the
    resource whose id is the path parameter ``resource_id_param`` if given.
    It returns the Decision, and otherwise raises :class:`SvcRefused` (403
    with the deny reasons on a denial; 401, 429 or 503 as the middleware
    would), answered with the middleware's JSON body by SvcMiddleware or
    :func:`refusal_handler`. The client is, in order: ``client``, the
    SvcMiddleware's, a default Client()."""

    async def dependency(request: Request) -> Decision:
        c = client or getattr(request.state, "svc_client", None) or _default_client()
        saml: SamlConfig = getattr(request.state, "svc_saml", None) or _default_saml()
        prefixed_only = getattr(request.state, "svc_prefixed_only", None)
        if prefixed_only is None:
            prefixed_only = saml.prefixed_only
        rid = request.path_params.get(resource_id_param) if resource_id_param else None
        out = await asyncio.to_thread(check_action, c, request.headers.get("authorization"), action,
                                      resource, None if rid is None else str(rid), None,
                                      session_token(request.headers.get("cookie"), saml.cookie_name, prefixed_only),
                                      request.headers.get("x-api-key"))
        if isinstance(out, Refusal):
            out = _browser(request.scope, out, saml, bool(getattr(request.state, "svc_login_redirect", False)))
            if "svc_client" in request.scope.get("state", {}) or _has_handler(request):
                raise SvcRefused(out)
            # Nothing in this app would answer SvcRefused: answer in
            # FastAPI's own shape rather than with a 500.
            _warn_no_handler()
            raise HTTPException(status_code=out.status, detail=out.payload(), headers=out.all_headers())
        request.state.svc_user = out.claims
        request.state.svc_decision = out.decision
        if not isinstance(out.decision, Decision):  # check_action admits with a Decision
            raise TypeError(f"svc authorize answered {type(out.decision).__name__}")
        return out.decision

    return dependency


def _has_handler(request: Request) -> bool:
    handlers = getattr(request.app, "exception_handlers", None) or {}
    return any(isinstance(k, type) and issubclass(SvcRefused, k) and k is not Exception for k in handlers)


_warned = False


def _warn_no_handler() -> None:
    global _warned
    if not _warned:
        _warned = True
        _log.warning("svc_sdk.fastapi.require_action is used without SvcMiddleware or "
                     "app.add_exception_handler(SvcRefused, refusal_handler): refusals are answered "
                     'as {"detail": ...} instead of the svc refusal body')


# The client and the sign-in settings of routes given none, made from the
# environment and svc.toml when a request first needs them.
_default_client = once(Client)
_default_saml = once(SamlConfig.load)


def _browser(scope: Scope, r: Refusal, saml: SamlConfig, redirect: bool) -> Refusal:
    """``r``, or the redirect to sign in for a browser refused for its token."""
    if not redirect:
        return r
    qs = bytes(scope.get("query_string") or b"").decode("latin-1")
    target = str(scope.get("path", "/")) + ("?" + qs if qs else "")
    loc = login_redirect_url(r.status, scope.get("method"), _header(scope, b"accept"),
                             _header(scope, b"authorization"), target, saml)
    return login_redirect(r, loc) if loc else r


def _header(scope: Scope, name: bytes) -> Optional[str]:
    for k, v in scope.get("headers") or ():
        if bytes(k).lower() == name:
            return bytes(v).decode("latin-1")
    return None


async def _send_refusal(scope: Scope, send: Send, r: Refusal) -> None:
    body = r.body()
    headers: list[Any] = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in r.all_headers().items()]
    headers.append((b"content-length", str(len(body)).encode()))
    if scope["type"] == "websocket":
        # A refused handshake: the refusal itself where the server takes an
        # HTTP answer to a WebSocket (the websocket.http.response
        # extension), else a close before accept, which the server answers
        # 403 (ASGI), with 1008, policy violation.
        if "websocket.http.response" in (scope.get("extensions") or {}):
            await send({"type": "websocket.http.response.start", "status": r.status, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": r.reason})
        return
    await send({"type": "http.response.start", "status": r.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
