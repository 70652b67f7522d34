"""A small pool of keep-alive HTTP/1.1 connections to one sidecar."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import urllib.parse


def split_url(url: str, name: str, form: str, source: str = "") -> tuple[urllib.parse.SplitResult, str, int]:
    """The parts, host and port (by default 80 or 443) of an http(s) URL to
    make a Pool of. Raises ValueError when ``url`` is no such URL or its
    port is invalid: "NAME 'URL' must be FORM" or "NAME 'URL' has an
    invalid port", either followed by ``source``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} {url!r} must be {form}{source}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"{name} {url!r} has an invalid port{source}") from None
    return parts, parts.hostname, port


class Unreachable(Exception):
    """No answer could be had from the sidecar: refused, reset, timed out."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


# Errors of a connection the server may have closed while it sat idle in
# the pool; the request is retried once on a fresh connection.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
          ConnectionAbortedError, http.client.CannotSendRequest, http.client.BadStatusLine)


class Pool:
    """Keeps up to ``size`` idle connections to ``host:port`` for reuse.

    It is safe for concurrent use: a connection is used by one thread at a
    time, and a thread that finds no idle connection opens a new one.
    """

    def __init__(self, scheme: str, host: str, port: int, timeout: float, size: int = 16,
                 ssl_context: ssl.SSLContext | None = None):
        self._scheme = scheme
        self._host = host
        self._port = port
        self._timeout = timeout
        self._size = size
        self._ssl = ssl_context
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _new(self) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                               context=self._ssl or ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def _get(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(), False

    def _put(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._size:
                self._idle.append(conn)
                return
        conn.close()

    def request(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """Sends one request and returns (status, body), bounded by the
        pool's timeout in total. Raises Unreachable when no answer came."""
        deadline = time.monotonic() + self._timeout
        for attempt in (0, 1):
            conn, reused = self._get()
            try:
                status, data, keep = self._roundtrip(conn, method, path, body, headers, deadline)
            except _STALE as e:
                conn.close()
                if reused and attempt == 0 and time.monotonic() < deadline:
                    continue
                raise Unreachable(f"connection to {self._host}:{self._port} failed: {_describe(e)}") from None
            except (TimeoutError, socket.timeout):
                conn.close()
                raise Unreachable(f"no answer from {self._host}:{self._port} within {self._timeout:g}s",
                                  timed_out=True) from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise Unreachable(f"connection to {self._host}:{self._port} failed: {_describe(e)}") from None
            if keep:
                self._put(conn)
            else:
                conn.close()
            return status, data
        raise AssertionError("unreachable")  # pragma: no cover

    def _roundtrip(self, conn: http.client.HTTPConnection, method: str, path: str, body: bytes,
                   headers: dict[str, str], deadline: float) -> tuple[int, bytes, bool]:
        _set_timeout(conn, deadline)
        if conn.sock is None:
            conn.connect()
            _set_timeout(conn, deadline)
        conn.request(method, path, body=body, headers=headers)
        _set_timeout(conn, deadline)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, data, not resp.will_close

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


def _set_timeout(conn: http.client.HTTPConnection, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    conn.timeout = left
    if conn.sock is not None:
        conn.sock.settimeout(left)


def _describe(e: BaseException) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, socket.gaierror):
        return "host not found"
    text = str(e) or type(e).__name__
    return text
