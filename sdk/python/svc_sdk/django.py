"""Django middleware and view decorator.

settings.py::

    MIDDLEWARE = [..., "svc_sdk.django.SvcMiddleware"]
    SVC_SIDECAR_URL = "http://localhost:7700"   # else the environment, then svc.toml, else this default
    SVC_FAIL_MODE = "closed"                    # else the environment, then svc.toml, else "open"
    SVC_EXCLUDE = ("/healthz",)                 # optional: exact paths, or prefixes ending with "*"

views.py::

    from svc_sdk.django import require_action

    @require_action("orders:read", resource_id_kwarg="order_id")
    def order(request, order_id):
        return JsonResponse({"claims": request.svc_claims})

``request.svc_claims`` holds the verified claims (a dict), or None in
development mode, on fail-open and on excluded paths; ``request.svc_decision``
holds the whole TokenDecision or Decision. Refused requests get a JSON body
``{"allow": false, "deny_reasons": [...], "reason": "...", "decision_id": "..."}``.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from ._web import Refusal, check_action, check_token, excluded
from .client import Client

__all__ = ["SvcMiddleware", "require_action", "client_from_settings"]


def client_from_settings() -> Client:
    """A Client configured by the settings SVC_SIDECAR_URL, SVC_FAIL_MODE
    and SVC_TIMEOUT, each falling back to the environment and svc.toml (then to the
    defaults) when unset."""
    return Client(getattr(settings, "SVC_SIDECAR_URL", None) or None,
                  getattr(settings, "SVC_FAIL_MODE", None) or None,
                  getattr(settings, "SVC_TIMEOUT", None) or None)


class SvcMiddleware:
    """Validates the bearer token of every request but those whose path is
    in the setting ``SVC_EXCLUDE``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        self.client = client_from_settings()
        self.exclude = tuple(getattr(settings, "SVC_EXCLUDE", ()) or ())

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.svc_claims = None
        request.svc_decision = None
        request.svc_client = self.client
        if excluded(request.path, self.exclude):
            return self.get_response(request)
        out = check_token(self.client, request.META.get("HTTP_AUTHORIZATION"))
        if isinstance(out, Refusal):
            return _response(out)
        request.svc_claims = out.claims
        request.svc_decision = out.decision
        return self.get_response(request)


def require_action(action: str, resource: str | None = None, resource_id_kwarg: str | None = None,
                   client: Client | None = None) -> Callable:
    """Decorates a view so that the policy must allow ``action`` (on the
    resource whose id is the URL keyword argument ``resource_id_kwarg``, if
    given); a denial answers 403 with the deny reasons. The client is, in
    order: ``client``, the SvcMiddleware's, one made from the settings."""

    def decorate(view: Callable) -> Callable:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            c = client or getattr(request, "svc_client", None) or _default_client()
            rid = kwargs.get(resource_id_kwarg) if resource_id_kwarg else None
            out = check_action(c, request.META.get("HTTP_AUTHORIZATION"), action, resource,
                               None if rid is None else str(rid))
            if isinstance(out, Refusal):
                return _response(out)
            request.svc_claims = out.claims
            request.svc_decision = out.decision
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


_default: Client | None = None
_default_lock = threading.Lock()


def _default_client() -> Client:
    global _default
    with _default_lock:
        if _default is None:
            _default = client_from_settings()
        return _default


def _response(r: Refusal) -> HttpResponse:
    resp = HttpResponse(r.body(), status=r.status)
    for k, v in r.all_headers().items():
        resp[k] = v
    return resp
