"""Flask extension: every request is authenticated by the sidecar.

    from svc_sdk.flask import SvcAuth, require_action
    auth = SvcAuth(app, exclude=("/healthz",))

    @app.get("/orders/<order_id>")
    @require_action("orders:read", resource_id_arg="order_id")
    def order(order_id):
        return {"sub": g.claims["sub"] if g.claims else "anonymous"}

An API key is read as the sidecar's checks read it: ``Authorization: ApiKey
<key>``, or ``X-Api-Key`` when the request has no Authorization header.
A request with neither an Authorization header nor an API key is
authenticated by the sign-in gateways' session cookie (``saml.cookie_name``,
default ``svc_session``): ``__Host-<cookie_name>``, else, unless
``prefixed_only`` (by default on behind Secure gateways, SAML ``acs_url``
and OpenID Connect ``oidc_redirect_urls``, see
:attr:`svc_sdk.saml.SamlConfig.prefixed_only`), ``<cookie_name>``.
With ``login_redirect=True`` (or the app config key ``SVC_LOGIN_REDIRECT``),
a browser refused for its token (401; a GET or HEAD preferring text/html,
see :mod:`svc_sdk.saml`) is redirected (302) to the gateway's login with its
path as ``return_to``.

Behind a proxy checking with a sidecar that signs identity tokens,
``SvcAuth(app, identity=IdentityVerifier(...))`` admits a request on its
``X-Svc-Identity`` alone, without calling the sidecar (see
:mod:`svc_sdk.identity`); ``g.svc_decision`` is then a TokenDecision with
reason ``ok``.

``g.claims`` holds the verified claims (a dict), or None in development
mode, on fail-open and on excluded paths; ``g.svc_decision`` holds the whole
TokenDecision or Decision. Refused requests get the answers listed in
:mod:`svc_sdk._web` with a JSON body
``{"allow": false, "deny_reasons": [...], "reason": "...", "decision_id": "..."}``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, TypeVar, cast

from flask import Flask, Response, current_app, g, request

from ._web import Admission, Refusal, check_action, check_token, excluded, login_redirect
from .client import Client
from .identity import IDENTITY_HEADER, IdentityVerifier, check_identity
from .saml import SamlConfig, login_redirect_url, session_token

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["SvcAuth", "require_action"]

_EXT = "svc_sdk"


class SvcAuth:
    """Validates the bearer token or API key of every request but those
    whose path is in ``exclude`` (exact paths, or prefixes ending with ``*``).

    Without ``client``, one is made from the app config keys
    ``SVC_SIDECAR_URL`` and ``SVC_FAIL_MODE``, falling back to the
    environment variables of the same names, then svc.toml (see Client).

    With ``identity``, a request is admitted on its ``X-Svc-Identity``
    token alone (401 without one or with one that does not verify, 503
    ``jwks-unavailable`` while the verifier has no keys); the sidecar is
    not called, and no client is made unless given.

    ``prefixed_only=True`` reads the session cookie only as
    ``__Host-<cookie_name>``, ``False`` also as ``<cookie_name>`` when the
    request has no prefixed one; None (the default) takes
    ``saml.prefixed_only``: prefixed only behind Secure gateways.
    """

    def __init__(self, app: Flask | None = None, client: Client | None = None, exclude: Iterable[str] = (),
                 saml: SamlConfig | None = None, login_redirect: bool | None = None,
                 identity: IdentityVerifier | None = None, prefixed_only: bool | None = None):
        self.identity = identity
        self.client = client
        self.exclude = tuple(exclude)
        self.saml = saml
        self.login_redirect = login_redirect
        self.prefixed_only = prefixed_only
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        if self.client is None and self.identity is None:
            self.client = _client_of(app)
        if self.saml is None:
            self.saml = SamlConfig.load()
        if self.login_redirect is None:
            self.login_redirect = bool(app.config.get("SVC_LOGIN_REDIRECT", False))
        app.extensions[_EXT] = self
        app.before_request(self._before_request)

    def _before_request(self) -> Response | None:
        g.claims = None
        g.svc_decision = None
        if excluded(request.path, self.exclude):
            return None
        if self.identity is not None:
            out = check_identity(self.identity, request.headers.get(IDENTITY_HEADER))
            if isinstance(out, Refusal):
                return _response(out)
            return self._admit(out)
        assert self.client is not None  # set by init_app
        out = check_token(self.client, request.headers.get("Authorization"), self._session(),
                          request.headers.get("X-Api-Key"))
        return self._admit(out)

    def _session(self) -> str:
        """The request's session token (:func:`svc_sdk.saml.session_token`)."""
        assert self.saml is not None  # set by init_app
        prefixed_only = self.saml.prefixed_only if self.prefixed_only is None else self.prefixed_only
        return session_token(request.headers.get("Cookie"), self.saml.cookie_name, prefixed_only)

    def _admit(self, out: Admission | Refusal) -> Response | None:
        if isinstance(out, Refusal):
            return _response(self._browser(out))
        g.claims = out.claims
        g.svc_decision = out.decision
        return None

    def _browser(self, r: Refusal) -> Refusal:
        if not self.login_redirect:
            return r
        qs = request.query_string.decode("latin-1")
        loc = login_redirect_url(r.status, request.method, request.headers.get("Accept"),
                                 request.headers.get("Authorization"),
                                 request.path + ("?" + qs if qs else ""), self.saml)
        return login_redirect(r, loc) if loc else r


def require_action(action: str, resource: str | None = None, resource_id_arg: str | None = None,
                   client: Client | None = None) -> Callable[[F], F]:
    """Decorates a view so that the policy must allow ``action`` (on the
    resource whose id is the view argument ``resource_id_arg``, if given);
    a denial answers 403 with the deny reasons. The client, session cookie
    and login redirect are the app's SvcAuth's (the client unless given)."""

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ext = _app_ext()
            assert ext.client is not None
            rid = kwargs.get(resource_id_arg) if resource_id_arg else None
            out = check_action(client or ext.client, request.headers.get("Authorization"), action, resource,
                               None if rid is None else str(rid), session=ext._session(),
                               x_api_key=request.headers.get("X-Api-Key"))
            refused = ext._admit(out)
            if refused is not None:
                return refused
            return view(*args, **kwargs)

        return cast(F, wrapper)

    return decorate


def _client_of(app: Flask) -> Client:
    return Client(app.config.get("SVC_SIDECAR_URL"), app.config.get("SVC_FAIL_MODE"),
                  app.config.get("SVC_TIMEOUT"))


def _app_ext() -> SvcAuth:
    ext = current_app.extensions.get(_EXT)
    if isinstance(ext, SvcAuth) and ext.client is None:
        # An identity-token SvcAuth makes no client until a view asks.
        ext.client = _client_of(current_app)
    if not isinstance(ext, SvcAuth) or ext.client is None:
        # require_action without SvcAuth: the app's settings, no hook.
        ext = SvcAuth(client=_client_of(current_app), saml=SamlConfig.load(),
                      login_redirect=bool(current_app.config.get("SVC_LOGIN_REDIRECT", False)))
        current_app.extensions[_EXT] = ext
    return ext


def _response(r: Refusal) -> Response:
    return Response(r.body(), status=r.status, headers=r.all_headers())
