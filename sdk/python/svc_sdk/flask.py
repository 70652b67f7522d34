"""Flask extension: every request is authenticated by the sidecar.

    from svc_sdk.flask import SvcAuth, require_action
    auth = SvcAuth(app, exclude=("/healthz",))

    @app.get("/orders/<order_id>")
    @require_action("orders:read", resource_id_arg="order_id")
    def order(order_id):
        return {"sub": g.claims["sub"] if g.claims else "anonymous"}

``g.claims`` holds the verified claims (a dict), or None in development
mode, on fail-open and on excluded paths; ``g.svc_decision`` holds the whole
TokenDecision or Decision. Refused requests get the answers listed in
:mod:`svc_sdk._web` with a JSON body
``{"allow": false, "deny_reasons": [...], "reason": "...", "decision_id": "..."}``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

from flask import Flask, Response, current_app, g, request

from ._web import Refusal, check_action, check_token, excluded
from .client import Client

__all__ = ["SvcAuth", "require_action"]

_EXT = "svc_sdk"


class SvcAuth:
    """Validates the bearer token of every request but those whose path is
    in ``exclude`` (exact paths, or prefixes ending with ``*``).

    Without ``client``, one is made from the app config keys
    ``SVC_SIDECAR_URL`` and ``SVC_FAIL_MODE``, falling back to the
    environment variables of the same names, then svc.toml (see Client).
    """

    def __init__(self, app: Flask | None = None, client: Client | None = None, exclude: Iterable[str] = ()):
        self.client = client
        self.exclude = tuple(exclude)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        if self.client is None:
            self.client = Client(app.config.get("SVC_SIDECAR_URL"), app.config.get("SVC_FAIL_MODE"),
                                 app.config.get("SVC_TIMEOUT"))
        app.extensions[_EXT] = self
        app.before_request(self._before_request)

    def _before_request(self) -> Response | None:
        g.claims = None
        g.svc_decision = None
        if excluded(request.path, self.exclude):
            return None
        out = check_token(self.client, request.headers.get("Authorization"))
        if isinstance(out, Refusal):
            return _response(out)
        g.claims = out.claims
        g.svc_decision = out.decision
        return None


def require_action(action: str, resource: str | None = None, resource_id_arg: str | None = None,
                   client: Client | None = None) -> Callable:
    """Decorates a view so that the policy must allow ``action`` (on the
    resource whose id is the view argument ``resource_id_arg``, if given);
    a denial answers 403 with the deny reasons. The client is the app's
    SvcAuth's unless given."""

    def decorate(view: Callable) -> Callable:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any):
            c = client or _app_client()
            rid = kwargs.get(resource_id_arg) if resource_id_arg else None
            out = check_action(c, request.headers.get("Authorization"), action, resource,
                               None if rid is None else str(rid))
            if isinstance(out, Refusal):
                return _response(out)
            g.claims = out.claims
            g.svc_decision = out.decision
            return view(*args, **kwargs)

        return wrapper

    return decorate


def _app_client() -> Client:
    ext = current_app.extensions.get(_EXT)
    if ext is None or ext.client is None:
        ext = SvcAuth.__new__(SvcAuth)
        ext.client, ext.exclude = Client(current_app.config.get("SVC_SIDECAR_URL"),
                                         current_app.config.get("SVC_FAIL_MODE"),
                                         current_app.config.get("SVC_TIMEOUT")), ()
        current_app.extensions[_EXT] = ext
    return ext.client


def _response(r: Refusal) -> Response:
    return Response(r.body(), status=r.status, headers=r.all_headers())
