"""What the deploy rehearsal (deploy-rehearsal.py) and the local invocation (lambda-invoke.py)
share: a quiet threaded HTTP server, a callback receiver on this machine, HS256 bearer tokens
as the service verifies them, and the Standard Webhooks signature check."""

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hangs up (a function killed at the end) is no failure


class Receiver:
    """A callback: answers the handshake, keeps every POST as (path, headers with lower-case
    names, body); a path with `fail` in it answers 500."""

    def __init__(self):
        self.posts = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, code, headers=()):
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self):
                token = self.headers.get("validation-token")
                self.answer(200, [("validation-token", token)] if token else [])

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver.cond:
                    receiver.posts.append((self.path, headers, body))
                    receiver.cond.notify_all()
                self.answer(500 if "fail" in self.path else 200)

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, match, seconds=10):
        """The first POST `match(path, headers)` accepts, waiting up to `seconds`; None."""

        def found():
            return next((p for p in self.posts if match(p[0], p[1])), None)

        with self.cond:
            self.cond.wait_for(found, seconds)
            return found()


def mint_token(secret, org, sub):
    """An HS256 access token of `org` with both scopes, valid ten minutes."""

    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    now = int(time.time())
    claims = {"sub": sub, "org_id": org, "scope": "webhooks/read webhooks/write",
              "iat": now, "exp": now + 600}
    payload = b64(json.dumps(claims).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


def signature_ok(secret, headers, body):
    """Whether one of the notification's signatures verifies with `secret` (`whsec_...`);
    `headers` with lower-case names."""
    key = base64.b64decode(secret.split("_", 1)[1])
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return expected in [s.split(",", 1)[1] for s in headers.get("webhook-signature", "").split()]
