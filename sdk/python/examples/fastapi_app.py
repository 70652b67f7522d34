"""FastAPI example: run `make run` at the repository root, then

    cd sdk/python && /usr/bin/python3 examples/fastapi_app.py
    curl -s localhost:8000/whoami -H 'Authorization: Bearer anything'
    curl -s localhost:8000/orders/42 -H 'Authorization: Bearer anything'
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi import Depends, FastAPI, Request  # noqa: E402

from svc_sdk import Client, Decision  # noqa: E402
from svc_sdk.fastapi import SvcMiddleware, require_action  # noqa: E402

app = FastAPI()
# SVC_SIDECAR_URL (default http://localhost:7700), SVC_FAIL_MODE (default open), or svc.toml [sdk].
app.add_middleware(SvcMiddleware, client=Client(), exclude=("/healthz",))


@app.get("/healthz")
async def healthz():
    return "ok"


@app.get("/whoami")
async def whoami(request: Request):
    # request.state.svc_user: the verified claims, or None (development
    # mode, fail-open).
    d = request.state.svc_decision
    return {"claims": request.state.svc_user, "subject": d.subject, "reason": d.reason}


@app.get("/orders/{order_id}")
async def order(order_id: str, request: Request,
                decision: Decision = Depends(require_action("orders:read", resource_id_param="order_id"))):
    return {"order": order_id, "decision_id": decision.decision_id, "claims": request.state.svc_user}


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8000)
