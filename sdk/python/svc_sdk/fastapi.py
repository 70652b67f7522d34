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

``request.state.svc_user`` holds the verified claims (a dict), or None in
development mode, on fail-open and on excluded paths;
``request.state.svc_decision`` holds the whole TokenDecision or Decision.
The sidecar is called on a worker thread (``asyncio.to_thread``) so the event
loop keeps serving other requests while a call is in flight.

The middleware refuses with a JSON body
``{"allow": false, "deny_reasons": [...], "reason": "...", "decision_id": "..."}``;
``require_action`` raises ``HTTPException`` whose ``detail`` is that object
(FastAPI answers ``{"detail": {...}}``) with the same status and headers.
"""

import asyncio
import threading
from typing import Any, Callable, Iterable, Optional

from fastapi import HTTPException, Request

from ._web import Refusal, check_action, check_token, excluded
from .client import Client, Decision

__all__ = ["SvcMiddleware", "require_action"]


class SvcMiddleware:
    """ASGI middleware validating the bearer token of every HTTP request but
    those whose path is in ``exclude`` (exact paths, or prefixes ending with
    ``*``). Use it as ``app.add_middleware(SvcMiddleware, client=...)``;
    without ``client`` one is made from ``SVC_SIDECAR_URL`` and
    ``SVC_FAIL_MODE``."""

    def __init__(self, app: Callable, client: Optional[Client] = None, exclude: Iterable[str] = ()):
        self.app = app
        self.client = client or Client()
        self.exclude = tuple(exclude)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["svc_client"] = self.client
        state["svc_user"] = None
        state["svc_decision"] = None
        if excluded(scope.get("path", ""), self.exclude):
            await self.app(scope, receive, send)
            return
        out = await asyncio.to_thread(check_token, self.client, _header(scope, b"authorization"))
        if isinstance(out, Refusal):
            await _send_refusal(send, out)
            return
        state["svc_user"] = out.claims
        state["svc_decision"] = out.decision
        await self.app(scope, receive, send)


def require_action(action: str, resource: Optional[str] = None, resource_id_param: Optional[str] = None,
                   client: Optional[Client] = None) -> Callable:
    """A dependency that authorizes ``action`` by the policy, on the
    resource whose id is the path parameter ``resource_id_param`` if given.
    It returns the Decision, and raises HTTPException (403 with the deny
    reasons on a denial; 401, 429 or 503 as the middleware would) otherwise.
    The client is, in order: ``client``, the SvcMiddleware's, a default
    Client()."""

    async def dependency(request: Request) -> Decision:
        c = client or getattr(request.state, "svc_client", None) or _default_client()
        rid = request.path_params.get(resource_id_param) if resource_id_param else None
        out = await asyncio.to_thread(check_action, c, request.headers.get("authorization"), action,
                                      resource, None if rid is None else str(rid))
        if isinstance(out, Refusal):
            raise HTTPException(status_code=out.status, detail=out.payload(), headers=out.headers or None)
        request.state.svc_user = out.claims
        request.state.svc_decision = out.decision
        return out.decision

    return dependency


_default: Optional[Client] = None
_default_lock = threading.Lock()


def _default_client() -> Client:
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


def _header(scope: dict, name: bytes) -> Optional[str]:
    for k, v in scope.get("headers") or ():
        if k.lower() == name:
            return v.decode("latin-1")
    return None


async def _send_refusal(send: Callable, r: Refusal) -> None:
    body = r.body()
    headers: list[Any] = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in r.all_headers().items()]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": r.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
