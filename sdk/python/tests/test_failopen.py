"""The fail-open notice, and the timeout: a slow sidecar is unreachable only
once the whole timeout has passed."""

import json
import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from svc_sdk import FAIL_OPEN_NOTICE, Client, SidecarUnavailableError


class NoticeTest(unittest.TestCase):
    def test_fail_open_client_says_so_once(self):
        with self.assertLogs("svc_sdk", "WARNING") as logs:
            Client("http://127.0.0.1:1", "open", config_file=None, env={})
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("requests are allowed when the sidecar is unreachable", logs.output[0])
        self.assertIn("SVC_FAIL_MODE=closed", logs.output[0])
        self.assertIn(FAIL_OPEN_NOTICE, logs.output[0])

    def test_default_is_open_and_says_so(self):
        with self.assertLogs("svc_sdk", "WARNING") as logs:
            c = Client("http://127.0.0.1:1", config_file=None, env={})
        self.assertEqual(c.fail_mode, "open")
        self.assertIn("fail_mode=open by default", logs.output[0])

    def test_fail_closed_client_is_silent(self):
        with self.assertNoLogs("svc_sdk", "WARNING"):
            Client("http://127.0.0.1:1", "closed", config_file=None, env={})
            Client("http://127.0.0.1:1", config_file=None, env={"SVC_FAIL_MODE": "closed"})


class _Slow(BaseHTTPRequestHandler):
    """Answers every POST with an allowed decision after the server's delay."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(self.server.delay)
        body = json.dumps({"allowed": True, "reason": "ok", "subject": "alice", "claims": {"sub": "alice"}}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up

    def log_message(self, *args):
        pass


class SlowSidecarTest(unittest.TestCase):
    """A sidecar that accepts at once and answers a little before the
    timeout gives its decision; a little after it, the fail mode applies,
    and never before the timeout."""

    TIMEOUT, MARGIN = 1.0, 0.35

    def _serve(self, delay: float) -> str:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
        srv.daemon_threads = True
        srv.delay = delay
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    def test_answer_before_the_timeout(self):
        url = self._serve(self.TIMEOUT - self.MARGIN)
        for mode in ("open", "closed"):
            with self.subTest(mode):
                c = Client(url, mode, self.TIMEOUT, config_file=None, env={})
                self.addCleanup(c.close)
                d = c.validate_token("t")
                self.assertEqual((d.allowed, d.reason, d.subject), (True, "ok", "alice"))
                a = c.authorize("t", "orders:read")
                self.assertEqual(a.reason, "ok")

    def test_answer_after_the_timeout(self):
        url = self._serve(self.TIMEOUT + self.MARGIN)
        c = Client(url, "open", self.TIMEOUT, config_file=None, env={})
        self.addCleanup(c.close)
        start = time.monotonic()
        d = c.validate_token("t")
        self.assertGreaterEqual(time.monotonic() - start, self.TIMEOUT)
        self.assertEqual((d.allowed, d.reason, d.claims), (True, "fail-open", None))

        c = Client(url, "closed", self.TIMEOUT, config_file=None, env={})
        self.addCleanup(c.close)
        start = time.monotonic()
        with self.assertRaises(SidecarUnavailableError):
            c.validate_token("t")
        self.assertGreaterEqual(time.monotonic() - start, self.TIMEOUT)

    def test_connection_not_accepted_counts_only_after_the_timeout(self):
        # A listener whose accept queue is full: the connection attempt
        # itself hangs, as with a sidecar too busy to accept.
        lis = socket.socket()
        lis.bind(("127.0.0.1", 0))
        lis.listen(0)
        self.addCleanup(lis.close)
        port = lis.getsockname()[1]
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            self.addCleanup(s.close)
        c = Client(f"http://127.0.0.1:{port}", "closed", self.TIMEOUT, config_file=None, env={})
        self.addCleanup(c.close)
        start = time.monotonic()
        with self.assertRaises(SidecarUnavailableError):
            c.validate_token("t")
        self.assertGreaterEqual(time.monotonic() - start, self.TIMEOUT)


if __name__ == "__main__":
    unittest.main()
