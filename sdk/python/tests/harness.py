"""Real peers for the SDK tests: the svc-sidecar binary built from this
repository, a JWKS endpoint whose RSA key signs real RS256 tokens, API
keys made by the core binary, a sidecar that is down, one that never
answers, and a counting TCP relay.

SVC_SIDECAR_BIN and SVC_CORE_BIN name prebuilt binaries (``make test``
passes them); otherwise each is built with ``go build`` once per test run.
"""

from __future__ import annotations

import atexit
import base64
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

REPO = Path(__file__).resolve().parents[3]
TENANT = "acme"
KID = "sdk-test-rsa-1"

# Fail-open warnings are asserted where they matter, not printed.
logging.getLogger("svc_sdk").setLevel(logging.ERROR)

# Bound of each SDK call to a running sidecar in these tests: far above
# the 1 s default, which a call can exceed on a loaded machine. Tests of
# the timeout itself use a black hole and a short timeout of their own.
CALL_TIMEOUT = 30.0

def in_ci() -> bool:
    """Whether the tests run under CI (the CI variable set), where a
    missing peer is a failure rather than a reason to skip."""
    return os.environ.get("CI", "") not in ("", "0", "false")


def missing(what: str, hint: str) -> None:
    """Skips the test, or fails it under CI, because ``what`` is not
    installed (the rule of the Go suites' internal/harness.Missing)."""
    import unittest

    if in_ci():
        raise AssertionError(f"{what} is required under CI but was not found ({hint})")
    raise unittest.SkipTest(f"{what} not found ({hint}); skipping outside CI")


_lock = threading.RLock()
_tmp = tempfile.mkdtemp(prefix="svc-sdk-py-")
atexit.register(shutil.rmtree, _tmp, True)


def b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


_given_ports: set[int] = set()


def free_addr() -> str:
    """A loopback address nothing listens on: port 0 is bound and released.
    A port handed out once is never handed out again by this process, so
    two listeners of one sidecar cannot be given the same port."""
    with _lock:
        for _ in range(50):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            if port not in _given_ports:
                _given_ports.add(port)
                return f"127.0.0.1:{port}"
    raise RuntimeError("free port: no unused port found")


_binaries: dict[str, str] = {}


def _go_binary(variable: str, package: str) -> str:
    """The binary of REPO's ``package`` (./cmd/NAME): the environment
    variable ``variable``, or built once into NAME in the run's temporary
    directory."""
    with _lock:
        if package not in _binaries:
            given = os.environ.get(variable)
            if not given:
                given = os.path.join(_tmp, os.path.basename(package))
                subprocess.run(["go", "build", "-o", given, package], cwd=REPO, check=True)
            _binaries[package] = given
        return _binaries[package]


def sidecar_binary() -> str:
    """The svc-sidecar binary: SVC_SIDECAR_BIN, or built once from REPO."""
    return _go_binary("SVC_SIDECAR_BIN", "./cmd/svc-sidecar")


def core_binary() -> str:
    """The core binary: SVC_CORE_BIN, or built once from REPO."""
    return _go_binary("SVC_CORE_BIN", "./cmd/core")


class IdP:
    """A JWKS endpoint on loopback and the RSA key that signs its tokens."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pub = self.key.public_key().public_numbers()
        n = pub.n.to_bytes((pub.n.bit_length() + 7) // 8, "big")
        e = pub.e.to_bytes((pub.e.bit_length() + 7) // 8, "big")
        jwks = json.dumps({"keys": [{"kty": "RSA", "kid": KID, "use": "sig", "alg": "RS256",
                                     "n": b64(n), "e": b64(e)}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/jwks.json":
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(jwks)))
                self.end_headers()
                self.wfile.write(jwks)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.jwks_url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"

    def token(self, claims: dict, key=None) -> str:
        """An RS256 token of exactly ``claims``, signed by the IdP's key or
        by ``key`` (under the IdP's kid, for a wrong signature)."""
        header = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": KID}).encode())
        payload = b64(json.dumps(claims).encode())
        signing = f"{header}.{payload}".encode()
        sig = (key or self.key).sign(signing, padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{payload}.{b64(sig)}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def claims(sub: str = "alice", tenant: str = TENANT, roles=("viewer",), **extra) -> dict:
    now = int(time.time())
    c = {"sub": sub, "tenant_id": tenant, "roles": list(roles), "iat": now, "exp": now + 300}
    c.update(extra)
    return c


class _AddressInUse(RuntimeError):
    """The sidecar exited because a port it was given was taken meanwhile."""


class Sidecar:
    """A svc-sidecar process on loopback ports, verifying tokens of ``idp``."""

    def __init__(self, idp: IdP, env: dict[str, str] | None = None) -> None:
        # A port released by free_addr can be taken by another process
        # before the sidecar binds it; such a start is tried again on
        # fresh ports.
        for attempt in range(1, 4):
            try:
                self._start(idp, env or {})
                return
            except _AddressInUse:
                if attempt == 3:
                    raise

    def _start(self, idp: IdP, env: dict[str, str]) -> None:
        self.http_addr = env.get("SVC_HTTP_ADDR") or free_addr()
        self.dir = tempfile.mkdtemp(prefix="sidecar-", dir=_tmp)
        full = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": self.dir,
            "SVC_SIDECAR_ADDR": free_addr(),
            "SVC_HTTP_ADDR": self.http_addr,
            "SVC_TENANT_ID": TENANT,
            "SVC_JWKS_URL": idp.jwks_url,
            "SVC_FAIL_MODE": "closed",
            "SVC_AUDIT_DESTINATION": "off",
            "SVC_LOG_LEVEL": "warn",
            "SVC_RATE_LIMIT_DEFAULT_RPM": "1000000",
        }
        full.update(env)
        self.log_path = os.path.join(self.dir, "sidecar.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sidecar_binary()], cwd=self.dir, env=full,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.url = f"http://{self.http_addr}"
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._log.close()
                log = self.log()
                if "address already in use" in log:
                    raise _AddressInUse(f"svc-sidecar exited with {self.proc.returncode}: {log}")
                raise RuntimeError(f"svc-sidecar exited with {self.proc.returncode}: {log}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"svc-sidecar not ready within 60s: {self.log()}")

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


_shared: tuple[IdP, Sidecar] | None = None


def shared() -> tuple[IdP, Sidecar]:
    """One IdP and one sidecar for the whole test run, stopped at exit."""
    global _shared
    with _lock:
        if _shared is None:
            idp = IdP()
            sc = Sidecar(idp)
            atexit.register(idp.close)
            atexit.register(sc.stop)
            _shared = (idp, sc)
        return _shared


class APIKeys:
    """A sidecar that takes both the IdP's tokens and the API keys of a key
    file made by ``core api-key create``: ``viewer`` (subject reporting,
    role viewer), ``revoked`` (revoked by ``core api-key revoke``),
    ``expired`` (past its expiry) and ``unknown`` (the revoked key's id
    with the viewer's secret: no entry matches)."""

    SUBJECT = "reporting"

    def __init__(self, idp: IdP) -> None:
        self.dir = tempfile.mkdtemp(prefix="api-keys-", dir=_tmp)
        self.file = os.path.join(self.dir, "api-keys.toml")
        self.expired = self._create("expiring-job", "viewer", "--expires", "1s")
        # The file holds the expiry in whole seconds: past it by then.
        expired_by = math.ceil(time.time() + 1) + 0.1
        self.viewer = self._create(self.SUBJECT, "viewer")
        self.revoked = self._create("old-job", "admin")
        self._core("revoke", key_id(self.revoked))
        self.unknown = f"svck_{key_id(self.revoked)}_{self.viewer[len('svck_') + 13:]}"
        time.sleep(max(0.0, expired_by - time.time()))
        self.sidecar = Sidecar(idp, {"SVC_API_KEYS_FILE": self.file})

    def _create(self, subject: str, role: str, *extra: str) -> str:
        return self._core("create", "--tenant", TENANT, "--subject", subject, "--role", role, *extra)

    def _core(self, *args: str) -> str:
        cmd, *rest = args
        out = subprocess.run([core_binary(), "api-key", cmd, "--file", self.file, *rest],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"core api-key {cmd}: exit {out.returncode}: {out.stderr}")
        return out.stdout.strip()


def key_id(key: str) -> str:
    """The id of an API key svck_<id>_<secret>: 12 characters."""
    return key[len("svck_"):len("svck_") + 12]


_keys: APIKeys | None = None


def api_keys() -> APIKeys:
    """One API-key sidecar (with the shared IdP) for the whole run."""
    global _keys
    with _lock:
        if _keys is None:
            idp, _ = shared()
            _keys = APIKeys(idp)
            atexit.register(_keys.sidecar.stop)
        return _keys


def down_url() -> str:
    """The URL of a sidecar that is down: nothing listens there."""
    return f"http://{free_addr()}"


class BlackHole:
    """A TCP listener that accepts connections and never answers, as a hung
    sidecar would."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._conns: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(c)

    def accepted(self) -> int:
        """How many connections were accepted so far."""
        return len(self._conns)

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        for c in self._conns:
            c.close()


class Relay:
    """A TCP relay to ``target`` (host:port) counting the connections it
    accepted, to observe connection reuse. ``drop_all`` closes every open
    connection, as a server closing idle keep-alive connections would."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.target)
            self.accepted += 1
            self._pairs.append((c, u))
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop_all(self) -> None:
        pairs, self._pairs = self._pairs, []
        for c, u in pairs:
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        time.sleep(0.05)

    def close(self) -> None:
        self.sock.close()
        self.drop_all()


class MariaDB:
    """A real MariaDB server (Debian's mariadb-server) in a temporary
    directory on a loopback port, without grant tables (user root, no
    password), with an empty database ``test``; stop() ends it."""

    def __init__(self) -> None:
        server = shutil.which("mariadbd") or ("/usr/sbin/mariadbd" if os.path.exists("/usr/sbin/mariadbd") else None)
        install = shutil.which("mariadb-install-db")
        if not server or not install:
            missing("mariadbd", "apt-get install mariadb-server")
        try:
            import MySQLdb  # noqa: F401
        except ImportError:
            missing("MySQLdb", "apt-get install python3-mysqldb")
        self.dir = tempfile.mkdtemp(prefix="svc-mariadb-")
        data = os.path.join(self.dir, "data")
        subprocess.run([str(install), "--no-defaults", f"--datadir={data}", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True)
        self.port = int(free_addr().rsplit(":", 1)[1])
        self.log = os.path.join(self.dir, "server.log")
        self.proc = subprocess.Popen([str(server), "--no-defaults", f"--datadir={data}",
                                      f"--socket={os.path.join(self.dir, 'sock')}", f"--port={self.port}",
                                      "--bind-address=127.0.0.1", "--user=root", "--skip-grant-tables",
                                      "--skip-log-bin", "--character-set-server=utf8mb4",
                                      "--collation-server=utf8mb4_general_ci", f"--log-error={self.log}",
                                      f"--pid-file={os.path.join(self.dir, 'pid')}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import MySQLdb
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = MySQLdb.connect(host="127.0.0.1", port=self.port, user="root")
                conn.cursor().execute("CREATE DATABASE test")
                conn.close()
                return
            except MySQLdb.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError("MariaDB did not start: " + open(self.log).read()[-2000:])
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class PostgreSQL:
    """A real PostgreSQL server (Debian's postgresql) in a temporary
    directory on a loopback port, run as the user postgres (it refuses
    root), trust authentication; stop() ends it."""

    def __init__(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
        runuser = shutil.which("runuser")
        if not bins or not runuser or os.geteuid() != 0:
            missing("PostgreSQL (run as root through runuser)", "apt-get install postgresql")
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            missing("psycopg2", "apt-get install python3-psycopg2")
        bindir = bins[-1].parent
        self.dir = tempfile.mkdtemp(prefix="svc-pg-")
        shutil.chown(self.dir, "postgres", "postgres")
        os.chmod(self.dir, 0o755)
        self.data = os.path.join(self.dir, "data")

        def run(name: str, *args: str) -> None:
            subprocess.run([str(runuser), "-u", "postgres", "--", str(bindir / name), *args],
                           check=True, capture_output=True)

        self._run = run
        run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale", "C")
        self.port = int(free_addr().rsplit(":", 1)[1])
        run("pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w", "-t", "60", "start", "-o",
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
