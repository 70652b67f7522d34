"""The client of the sidecar's local HTTP JSON API."""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import time
import tomllib
import weakref
from dataclasses import dataclass
from typing import Any, Mapping, NoReturn

from ._pool import Pool, Unreachable, split_url
from .plan import DIALECTS, Plan, PlanError

__all__ = [
    "Client", "TokenDecision", "Decision", "SvcError", "SidecarUnavailableError",
    "SidecarRequestError", "DEFAULT_SIDECAR_URL", "DEFAULT_TIMEOUT", "DEFAULT_CONFIG_FILE", "FAIL_OPEN",
    "FAIL_CLOSED", "FAIL_OPEN_NOTICE", "Settings", "resolve_settings",
]

#: Used when neither the constructor nor SVC_SIDECAR_URL names the sidecar.
DEFAULT_SIDECAR_URL = "http://localhost:7700"
#: Seconds one call may take, connection included, before the sidecar is
#: taken as unreachable and the fail mode applies.
DEFAULT_TIMEOUT = 1.0
FAIL_OPEN = "open"
FAIL_CLOSED = "closed"

#: Read, in the working directory, for the [sdk] keys sidecar_addr and
#: fail_mode when neither the arguments nor the environment give them, as
#: the Go client and the sidecar read it.
DEFAULT_CONFIG_FILE = "svc.toml"

PATH_VALIDATE_TOKEN = "/v1/validate-token"
PATH_AUTHORIZE = "/v1/authorize"
PATH_PLAN_RESOURCES = "/v1/plan-resources"

ANONYMOUS = "anonymous"
FAIL_OPEN_REASON = "fail-open"
UNAVAILABLE_REASON = "unavailable"

# An outage would otherwise log one warning per request.
_WARN_EVERY = 10.0

#: Logged once (a warning on the ``svc_sdk`` logger) when a fail-open
#: Client is made.
FAIL_OPEN_NOTICE = ("svc_sdk: fail_mode=open: requests are allowed when the sidecar is unreachable; "
                    "set SVC_FAIL_MODE=closed (or sdk.fail_mode, Client(fail_mode='closed')) to deny them instead")

_log = logging.getLogger("svc_sdk")


class SvcError(Exception):
    """Base of the SDK's errors; ``reason`` is a stable kebab-case code."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class SidecarUnavailableError(SvcError):
    """No decision could be had: the sidecar is unreachable or too slow and
    the fail mode is ``closed``, or it could not decide (reason
    ``policy-error``, in both modes). Middleware answers 503."""


class SidecarRequestError(SvcError):
    """The sidecar refused the request itself (for example a malformed
    action), or answered something that is not its API. This is a bug or a
    misconfiguration on the caller's side, never a decision."""


@dataclass(frozen=True)
class TokenDecision:
    """The result of :meth:`Client.validate_token`.

    ``claims`` is the verified claim set, or None when the token was refused,
    in development mode (reason ``dev-anonymous``) and on ``fail-open``.
    """

    allowed: bool
    claims: dict[str, Any] | None
    reason: str
    subject: str = ""
    tenant_id: str = ""
    message: str = ""
    #: Identifies the answer in the sidecar's audit and decision logs;
    #: empty when the sidecar did not answer (``fail-open``).
    decision_id: str = ""


@dataclass(frozen=True)
class Decision:
    """The result of :meth:`Client.authorize`: a token check followed, when
    the token was accepted, by a policy evaluation."""

    allow: bool
    deny_reasons: list[str]
    reason: str
    decision_id: str = ""
    subject: str = ""
    tenant_id: str = ""
    claims: dict[str, Any] | None = None
    policy_revision: str = ""
    #: Seconds to wait before retrying, when reason is ``rate-limited``.
    retry_after: float | None = None
    message: str = ""


class Client:
    """Asks the sidecar for token and authorization decisions.

    ``sidecar_url`` defaults to ``SVC_SIDECAR_URL``; then to
    ``SVC_SIDECAR_ADDR`` and the key ``sdk.sidecar_addr`` of ``svc.toml``
    (``config_file``, in the working directory), each only when it is an
    ``http://`` or ``https://`` URL (a host:port there is the sidecar's gRPC
    address, which this client does not speak); then to
    ``http://localhost:7700``. ``fail_mode`` defaults to ``SVC_FAIL_MODE``,
    then ``sdk.fail_mode`` of ``svc.toml``, then ``open``. ``timeout``
    (seconds per call, connection included) defaults to
    :data:`DEFAULT_TIMEOUT`. ``config_file=None`` reads no file; a missing
    file is no error, an unreadable or malformed one is. Connections are
    kept alive and pooled. A client is safe to share between threads; make
    one per process.

    Fail modes, when the sidecar is unreachable, times out, or answers 502,
    503 or 504: ``open`` returns an allowed decision with no claims and
    reason ``fail-open``; ``closed`` raises :class:`SidecarUnavailableError`.
    A fail-open client logs :data:`FAIL_OPEN_NOTICE` once, when it is made.
    A sidecar counts as unreachable when the connection is refused or no
    answer came within the whole ``timeout``, never sooner.
    A sidecar that answers but cannot decide (500 ``policy-error``) raises
    :class:`SidecarUnavailableError` in both modes. An invalid token is a
    decision with ``allowed=False`` in both modes.
    """

    def __init__(self, sidecar_url: str | None = None, fail_mode: str | None = None,
                 timeout: float | None = None, *, pool_size: int = 16, ssl_context: ssl.SSLContext | None = None,
                 env: Mapping[str, str] | None = None, config_file: str | None = DEFAULT_CONFIG_FILE):
        env = os.environ if env is None else env
        st = resolve_settings(sidecar_url, fail_mode, env, config_file)
        url, mode, source = st.sidecar_url, st.fail_mode, st.sidecar_url_source
        if mode not in (FAIL_OPEN, FAIL_CLOSED):
            raise ValueError(f'fail mode {mode!r} is neither "open" nor "closed" ({st.fail_mode_source})')
        if timeout is None:
            timeout = DEFAULT_TIMEOUT
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        parts, host, port = split_url(url, "sidecar URL", "http://host:port or https://host:port", f" ({source})")
        self._url = url
        self._fail_mode = mode
        self._timeout = float(timeout)
        self._base = parts.path.rstrip("/")
        self._authority = parts.netloc.rpartition("@")[2]
        self._pool = Pool(parts.scheme, host, port, self._timeout, pool_size, ssl_context)
        weakref.finalize(self, self._pool.close)
        self._warn_lock = threading.Lock()
        self._last_warn = 0.0
        if mode == FAIL_OPEN:
            src = st.fail_mode_source
            _log.warning("%s (sidecar %s; fail_mode=open %s)", FAIL_OPEN_NOTICE, url,
                         "by default" if src == "default" else f"from {src}")

    @property
    def sidecar_url(self) -> str:
        """The base URL of the sidecar's local HTTP API."""
        return self._url

    @property
    def fail_mode(self) -> str:
        """``open`` or ``closed``."""
        return self._fail_mode

    @property
    def timeout(self) -> float:
        """Seconds one call may take."""
        return self._timeout

    def validate_token(self, token: str) -> TokenDecision:
        """Verifies a bearer token (without the ``Bearer`` prefix) or an API
        key (``svck_...``)."""
        try:
            body = self._call(PATH_VALIDATE_TOKEN, {"token": token or ""}, "validate-token")
        except _FailOpen:
            return TokenDecision(True, None, FAIL_OPEN_REASON, subject=ANONYMOUS,
                                 message="sidecar unavailable; allowed by fail_mode=open")
        return TokenDecision(
            allowed=body.get("allowed") is True,
            claims=_claims(body.get("claims")),
            reason=str(body.get("reason") or ""),
            subject=str(body.get("subject") or ""),
            tenant_id=str(body.get("tenant_id") or ""),
            message=str(body.get("message") or ""),
            decision_id=str(body.get("decision_id") or ""),
        )

    def authorize(self, token: str, action: str, resource: str | None = None,
                  resource_id: str | None = None, *, resource_tenant: str | None = None,
                  request: Mapping[str, Any] | None = None,
                  resource_attributes: Mapping[str, Any] | None = None) -> Decision:
        """Asks whether the bearer of ``token`` may perform ``action``
        (``"<resource>:<verb>"``) on a resource of type ``resource`` (default:
        the action's prefix) with id ``resource_id``, owned by
        ``resource_tenant`` (default: the deployment's tenant). ``request``
        optionally describes the HTTP request for the policy (method, path,
        host, query, headers). ``resource_attributes`` are what the
        application knows about the resource (owner, status…), JSON values
        the policy sees as ``input.resource.attributes``; at most 64, keys of
        at most 128 bytes, 4 levels deep and 16 KiB as JSON, else the sidecar
        rejects the request (``SidecarRequestError``, code ``input-invalid``)."""
        msg: dict[str, Any] = {"token": token or "", "action": action}
        res: dict[str, Any] = {k: v for k, v in (("type", resource), ("id", resource_id), ("tenant", resource_tenant)) if v}
        if resource_attributes:
            res["attributes"] = dict(resource_attributes)
        if res:
            msg["resource"] = res
        if request:
            msg["request"] = dict(request)
        try:
            body = self._call(PATH_AUTHORIZE, msg, "authorize")
        except _FailOpen:
            return Decision(True, [], FAIL_OPEN_REASON, subject=ANONYMOUS,
                            message="sidecar unavailable; allowed by fail_mode=open")
        return Decision(
            allow=body.get("allowed") is True,
            deny_reasons=[str(r) for r in body.get("deny_reasons") or []],
            reason=str(body.get("reason") or ""),
            decision_id=str(body.get("decision_id") or ""),
            subject=str(body.get("subject") or ""),
            tenant_id=str(body.get("tenant_id") or ""),
            claims=_claims(body.get("claims")),
            policy_revision=str(body.get("policy_revision") or ""),
            retry_after=_duration(body.get("retry_after")),
            message=str(body.get("message") or ""),
        )

    def plan_resources(self, action: str, resource_type: str, dialect: str = "postgres", *,
                       token: str | None = None) -> Plan:
        """Asks which resources of type ``resource_type`` the bearer of
        ``token`` (a bearer token or an API key) may perform ``action`` on:
        a :class:`~svc_sdk.plan.Plan`, ``always_allowed``, ``always_denied``
        or ``conditional`` with a condition tree, and the sidecar's SQL in
        ``dialect`` (``postgres``, ``sqlite`` or ``mysql``): ``plan.sql.where``
        with bind parameters only, ``plan.sql.params``. A refused credential
        is an ``always_denied`` plan with the token's failure code as its
        reason. A policy the plan cannot express raises
        :class:`SidecarRequestError` with code ``plan-unsupported``.

        A plan never fails open: with the sidecar unreachable it raises
        :class:`SidecarUnavailableError` in both fail modes, as listing
        every row of every tenant is no safe default."""
        if dialect not in DIALECTS:
            raise ValueError(f"dialect {dialect!r} is not postgres, sqlite or mysql")
        msg = {"token": token or "", "action": action, "resource_type": resource_type, "dialect": dialect}
        body = self._call(PATH_PLAN_RESOURCES, msg, "plan-resources", fail_open=False)
        try:
            return Plan.from_json(body)
        except PlanError as e:
            raise SidecarRequestError("input-invalid", f"svc plan-resources: the answer at {self._url}: {e}") from None

    def close(self) -> None:
        """Closes the pooled connections."""
        self._pool.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(sidecar_url={self._url!r}, fail_mode={self._fail_mode!r}, timeout={self._timeout!r})"

    def _call(self, path: str, msg: dict[str, Any], op: str, fail_open: bool = True) -> dict[str, Any]:
        data = json.dumps(msg, separators=(",", ":")).encode()
        headers = {"Host": self._authority, "Content-Type": "application/json",
                   "Accept": "application/json", "Connection": "keep-alive"}
        try:
            status, raw = self._pool.request("POST", self._base + path, data, headers)
        except Unreachable as e:
            self._unavailable(op, UNAVAILABLE_REASON, str(e), fail_open)
        if status == 500:
            # The sidecar answered and could not decide (policy-error): a
            # refusal in both fail modes, never a fail-open pass.
            code, text = _error_of(raw)
            raise SidecarUnavailableError(code or "policy-error", f"svc {op}: sidecar {self._url} could not decide: {text}")
        if status >= 500:
            code, text = _error_of(raw)
            self._unavailable(op, code or UNAVAILABLE_REASON, f"sidecar answered {status}: {text}", fail_open)
        if status != 200:
            code, text = _error_of(raw)
            raise SidecarRequestError(code or "input-invalid", f"svc {op}: sidecar answered {status}: {text}")
        try:
            body = json.loads(raw)
        except ValueError:
            raise SidecarRequestError("input-invalid", f"svc {op}: the answer at {self._url} is not JSON") from None
        if not isinstance(body, dict):
            raise SidecarRequestError("input-invalid", f"svc {op}: the answer at {self._url} is not a JSON object")
        return body

    def _unavailable(self, op: str, reason: str, detail: str, fail_open: bool = True) -> NoReturn:
        if self._fail_mode == FAIL_OPEN and fail_open:
            now = time.monotonic()
            with self._warn_lock:
                warn = now - self._last_warn >= _WARN_EVERY or self._last_warn == 0.0
                if warn:
                    self._last_warn = now
            if warn:
                _log.warning("svc sidecar unavailable; allowing by fail_mode=open (op=%s reason=%s: %s)",
                             op, reason, detail)
            raise _FailOpen()
        raise SidecarUnavailableError(reason, f"svc {op}: sidecar {self._url} unavailable: {detail}")


@dataclass(frozen=True)
class Settings:
    """Where a Client's sidecar URL and fail mode come from; the
    ``*_source`` fields name the argument, variable or file key, for
    errors."""

    sidecar_url: str
    sidecar_url_source: str
    fail_mode: str
    fail_mode_source: str


def resolve_settings(sidecar_url: str | None, fail_mode: str | None, env: Mapping[str, str],
                     config_file: str | None = DEFAULT_CONFIG_FILE) -> Settings:
    """The sidecar URL and fail mode a Client uses, in the order documented
    on :class:`Client`."""
    url = [(sidecar_url, "sidecar_url"), (env.get("SVC_SIDECAR_URL"), "SVC_SIDECAR_URL"),
           (_http_url(env.get("SVC_SIDECAR_ADDR")), "SVC_SIDECAR_ADDR")]
    mode = [(fail_mode, "fail_mode"), (env.get("SVC_FAIL_MODE"), "SVC_FAIL_MODE")]
    if config_file and not (_first(url) and _first(mode)):
        sdk = _sdk_table(config_file)
        url.append((_http_url(sdk.get("sidecar_addr")), f"sdk.sidecar_addr of {config_file}"))
        mode.append((sdk.get("fail_mode"), f"sdk.fail_mode of {config_file}"))
    u = _first(url) or (DEFAULT_SIDECAR_URL, "default")
    m = _first(mode) or (FAIL_OPEN, "default")
    return Settings(u[0], u[1], m[0], m[1])


def _first(choices: list[tuple[str | None, str]]) -> tuple[str, str] | None:
    for value, source in choices:
        if value:
            return value, source
    return None


def _http_url(v: str | None) -> str:
    v = (v or "").strip()
    return v if v.startswith(("http://", "https://")) else ""


def _sdk_table(path: str) -> dict[str, str]:
    """The string keys sidecar_addr and fail_mode of the [sdk] table of a
    TOML file; {} when the file does not exist. Other keys belong to the
    sidecar and are not checked here."""
    sdk = load_toml(path).get("sdk", {})
    if not isinstance(sdk, dict):
        raise ValueError(f"{path}: sdk must be a table")
    out = {}
    for key in ("sidecar_addr", "fail_mode"):
        if key in sdk:
            if not isinstance(sdk[key], str):
                raise ValueError(f"{path}: sdk.{key} must be a string")
            out[key] = sdk[key]
    return out


def load_toml(path: str) -> dict[str, Any]:
    """The TOML document of ``path``; {} when the file does not exist. An
    unreadable or malformed file is a ValueError naming it."""
    try:
        with open(path, "rb") as f:
            # A byte order mark, which some editors write, is no TOML error.
            doc = tomllib.loads(f.read().decode("utf-8-sig"))
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not valid TOML: not UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None
    return doc


class _FailOpen(Exception):
    pass


def _claims(v: Any) -> dict[str, Any] | None:
    return v if isinstance(v, dict) else None


def _duration(v: Any) -> float | None:
    # protojson writes a google.protobuf.Duration as "1.500s".
    if isinstance(v, str) and v.endswith("s"):
        try:
            return float(v[:-1])
        except ValueError:
            return None
    return None


def _error_of(raw: bytes) -> tuple[str, str]:
    try:
        err = json.loads(raw).get("error") or {}
        return str(err.get("code") or ""), str(err.get("message") or "")
    except (ValueError, AttributeError):
        return "", raw[:200].decode("utf-8", "replace")
