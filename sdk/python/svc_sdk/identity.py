"""Verifies the identity token the sidecar hands the upstream of every
allowed request (``X-Svc-Identity``, with ``identity_token`` configured)
against the sidecar's keys at ``/.well-known/jwks.json``. A service behind
a proxy that asked the sidecar has its decision in that token: the
middleware of :mod:`svc_sdk.flask`, :mod:`svc_sdk.fastapi` and
:mod:`svc_sdk.django`, given a verifier, admits a request on it alone,
without calling the sidecar::

    from svc_sdk.identity import IdentityVerifier
    verifier = IdentityVerifier("http://127.0.0.1:7700/.well-known/jwks.json",
                                audience="orders.internal")
    claims = verifier.verify(token)          # or raises IdentityError(reason)

ES256 signatures are checked with the ``cryptography`` package (the extra
``svc_sdk[identity]``), imported when a verifier is made: the rest of the
SDK does not need it.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping

from ._pool import Pool, Unreachable, split_url
from ._web import Admission, Refusal, refusal_of
from .client import SvcError, TokenDecision

if TYPE_CHECKING:  # pragma: no cover
    import ssl

    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey

__all__ = ["IDENTITY_HEADER", "IdentityVerifier", "IdentityError", "check_identity",
           "DEFAULT_REFRESH", "MIN_REFETCH", "DEFAULT_SKEW"]

#: The header carrying the identity token.
IDENTITY_HEADER = "X-Svc-Identity"
#: Seconds a fetched key set is used: the sidecar answers with max-age=60.
DEFAULT_REFRESH = 60.0
#: A token of an unknown key fetches the set again at most this often.
MIN_REFETCH = 5.0
#: Seconds of clock skew tolerated on exp, nbf and iat.
DEFAULT_SKEW = 5.0
#: Seconds one fetch of the key set may take.
DEFAULT_FETCH_TIMEOUT = 5.0


class IdentityError(SvcError):
    """A refused identity token; ``reason`` is the code the Go and
    TypeScript SDKs give: ``token-missing``, ``token-malformed``,
    ``signature-invalid``, ``token-expired``, ``token-not-yet-valid``,
    ``audience-mismatch``, ``issuer-mismatch``, or ``jwks-unavailable``
    when no key set could be had."""


class IdentityVerifier:
    """Verifies identity tokens against the sidecar's key set at
    ``jwks_url``; share one per sidecar (it is safe for concurrent use).

    ``audience`` is this service as the sidecar names it in ``aud`` (the
    Host the proxy forwards, or the destination's principal Envoy reports);
    None accepts any audience, which lets a token minted for another
    service through: set it. ``issuer``, when set, must be ``iss`` (the
    sidecar's ``sdk.service_name``, default ``svc-sidecar``). The key set
    is fetched on first use, used for ``refresh`` seconds, and fetched
    again at most every :data:`MIN_REFETCH` seconds for a token of a key it
    does not hold, so a rotation needs no restart; a failed fetch keeps the
    set of a moment ago. ``skew`` seconds of clock skew are tolerated.

    Raises ImportError when the ``cryptography`` package is not installed.
    """

    def __init__(self, jwks_url: str, audience: str | None = None, issuer: str | None = None, *,
                 refresh: float = DEFAULT_REFRESH, skew: float = DEFAULT_SKEW,
                 timeout: float = DEFAULT_FETCH_TIMEOUT, ssl_context: ssl.SSLContext | None = None):
        try:
            import cryptography.hazmat.primitives.asymmetric.ec  # noqa: F401
        except ImportError as e:
            raise ImportError("svc_sdk.identity needs the cryptography package "
                              "(pip install 'svc_sdk[identity]', or Debian's python3-cryptography)",
                              name=e.name) from e
        if not jwks_url:
            raise ValueError("IdentityVerifier: a JWKS URL is required")
        if refresh <= 0 or skew < 0 or timeout <= 0:
            raise ValueError("refresh and timeout must be positive, skew not negative")
        parts, host, port = split_url(jwks_url, "JWKS URL", "http(s)://host[:port]/path")
        self.jwks_url = jwks_url
        self.audience = audience
        self.issuer = issuer
        self.refresh = float(refresh)
        self.skew = float(skew)
        self._path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        self._authority = parts.netloc.rpartition("@")[2]
        self._pool = Pool(parts.scheme, host, port, float(timeout), 1, ssl_context)
        self._lock = threading.Lock()
        self._keys: dict[str, EllipticCurvePublicKey] | None = None
        self._fetched = 0.0

    def verify(self, token: str | None) -> dict[str, Any]:
        """Verifies ``token``, an X-Svc-Identity value, and returns its
        claims (``sub``, ``tenant_id``, ``roles``, ``kind``, ``aud``,
        ``decision_id``, ...); raises :class:`IdentityError` when it is
        refused."""
        if not token:
            raise IdentityError("token-missing", "no identity token")
        parts = token.split(".")
        if len(parts) != 3:
            raise IdentityError("token-malformed", "not a JWT")
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            sig = _unb64(parts[2])
        except (ValueError, binascii.Error):
            raise IdentityError("token-malformed", "not a JWT") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise IdentityError("token-malformed", "not a JWT")
        kid = header.get("kid")
        if header.get("alg") != "ES256" or not isinstance(kid, str) or not kid:
            raise IdentityError("signature-invalid", "not an ES256 token with a kid")
        key = self._key_set(False).get(kid)
        if key is None:
            # Perhaps a key the sidecar rotated to since the last fetch.
            key = self._key_set(True).get(kid)
        if key is None or not _verify_es256(key, f"{parts[0]}.{parts[1]}".encode("ascii"), sig):
            raise IdentityError("signature-invalid", "the token does not verify against the sidecar's keys")
        now = time.time()
        exp, nbf, iat = _number(claims.get("exp")), _number(claims.get("nbf")), _number(claims.get("iat"))
        if exp is None or now > exp + self.skew:
            raise IdentityError("token-expired", "identity token expired")
        if nbf is not None and now < nbf - self.skew:
            raise IdentityError("token-not-yet-valid", "identity token not yet valid")
        if iat is not None and now < iat - self.skew:
            raise IdentityError("token-malformed", "identity token issued in the future")
        aud = claims.get("aud")
        if self.audience is not None and not (aud == self.audience
                                              or isinstance(aud, list) and self.audience in aud):
            raise IdentityError("audience-mismatch", "identity token is for another audience")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise IdentityError("issuer-mismatch", "identity token of another issuer")
        return claims

    def close(self) -> None:
        """Closes the kept-alive connection to the sidecar."""
        self._pool.close()

    def _key_set(self, refetch: bool) -> dict[str, EllipticCurvePublicKey]:
        """The key set, fetched again when it is older than ``refresh``,
        or (``refetch``) older than :data:`MIN_REFETCH`."""
        with self._lock:
            age = time.monotonic() - self._fetched
            if self._keys is not None and (age < MIN_REFETCH if refetch else age < self.refresh):
                return self._keys
            try:
                keys = self._fetch()
            except (Unreachable, ValueError) as e:
                if self._keys is None:
                    raise IdentityError("jwks-unavailable",
                                        f"the sidecar's identity keys could not be fetched: {e}") from None
                # The keys of a moment ago still verify; try again in
                # MIN_REFETCH.
                self._fetched = time.monotonic() - self.refresh + MIN_REFETCH
                return self._keys
            self._keys, self._fetched = keys, time.monotonic()
            return keys

    def _fetch(self) -> dict[str, EllipticCurvePublicKey]:
        status, body = self._pool.request("GET", self._path, b"", {
            "Host": self._authority, "Accept": "application/json"})
        if status != 200:
            raise ValueError(f"{self.jwks_url} answered {status}")
        doc = json.loads(body)
        if not isinstance(doc, dict) or not isinstance(doc.get("keys", []), list):
            raise ValueError(f"{self.jwks_url} answered no key set")
        keys: dict[str, EllipticCurvePublicKey] = {}
        for jwk in doc.get("keys") or []:
            if isinstance(jwk, dict):
                key = _ec_key(jwk)
                if key is not None:
                    keys[str(jwk["kid"])] = key
        return keys


def check_identity(verifier: IdentityVerifier, token: str | None) -> Admission | Refusal:
    """Admits a request on its X-Svc-Identity value ``token``: an
    Admission whose decision is a TokenDecision (reason ``ok``, the
    token's ``sub`` and ``tenant_id``), or the refusal: 401 with a Bearer
    challenge, 503 ``jwks-unavailable`` while no key set could be had."""
    try:
        claims = verifier.verify(token)
    except IdentityError as e:
        return refusal_of(e.reason)
    return Admission(claims, TokenDecision(True, claims, "ok", subject=_str(claims.get("sub")),
                                           tenant_id=_str(claims.get("tenant_id"))))


def _unb64(s: str) -> bytes:
    if "=" in s:
        raise ValueError("not base64url")
    return base64.b64decode(s + "=" * (-len(s) % 4), altchars=b"-_", validate=True)


def _number(v: Any) -> float | None:
    """A numeric date claim as a number; None when absent or not a number."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _ec_key(jwk: Mapping[str, Any]) -> EllipticCurvePublicKey | None:
    """The P-256 public key of ``jwk``, or None for any other key."""
    from cryptography.hazmat.primitives.asymmetric import ec

    kid, x, y = jwk.get("kid"), jwk.get("x"), jwk.get("y")
    if not (kid and jwk.get("kty") == "EC" and jwk.get("crv") == "P-256"
            and isinstance(x, str) and isinstance(y, str)):
        return None
    try:
        xb, yb = _unb64(x), _unb64(y)
        if len(xb) != 32 or len(yb) != 32:
            return None
        return ec.EllipticCurvePublicNumbers(int.from_bytes(xb, "big"), int.from_bytes(yb, "big"),
                                             ec.SECP256R1()).public_key()
    except ValueError:  # not base64url, or not a point of the curve
        return None


def _verify_es256(key: EllipticCurvePublicKey, signed: bytes, sig: bytes) -> bool:
    """Whether ``sig``, JOSE's r||s, signs ``signed`` with ``key``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    if len(sig) != 64:
        return False
    r, s = int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")
    try:
        key.verify(encode_dss_signature(r, s), signed, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True
