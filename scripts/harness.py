"""What the deploy rehearsal, the local invocation and the profile share: the project's own
receiver, tokens and signature check, driven from Python. `webhooks-local listen` is the one
callback receiver (receiver/), `webhooks-local token` mints the bearer tokens the service
verifies, `webhooks-local verify` checks a notification's Standard Webhooks signature."""

import json
import subprocess
import threading
import time
import uuid
from pathlib import Path


class Receiver:
    """`webhooks-local listen` on a free port: answers the handshake, records every POST; a
    path starting with one of `fail_paths` answers 500."""

    def __init__(self, webhooks_local, work, fail_paths=("/fail",)):
        self.webhooks_local = webhooks_local
        self.record = Path(work) / f"receiver-{uuid.uuid4().hex[:8]}.jsonl"
        command = [webhooks_local, "listen", "--port", "0", "--record", str(self.record)]
        for path in fail_paths:
            command += ["--fail-path", path]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        banner = self.process.stderr.readline()  # "... receiving callbacks on http://ADDR/"
        if "http://" not in banner:
            self.process.kill()
            raise RuntimeError(f"webhooks-local listen did not start: {banner}{self.process.stderr.read()}")
        self.base = "http://" + banner.split("http://", 1)[1].strip().rstrip("/")
        # Its log of handshakes and answers, read so the pipe never fills.
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    @property
    def posts(self):
        """Every POST so far: {"path", "headers" (lower-case names), "body"}."""
        if not self.record.exists():
            return []
        # A line still being written has no newline yet: left for the next read.
        return [json.loads(line) for line in self.record.read_text().split("\n")[:-1]]

    def count(self):
        """How many POSTs arrived so far."""
        return self.record.read_bytes().count(b"\n") if self.record.exists() else 0

    def wait_for(self, match, seconds=10):
        """The first POST `match(path, headers)` accepts, waiting up to `seconds`; None."""
        deadline = time.time() + seconds
        while True:
            found = next((p for p in self.posts if match(p["path"], p["headers"])), None)
            if found is not None or time.time() > deadline:
                return found
            time.sleep(0.05)

    def stop(self):
        self.process.kill()
        self.process.wait()


def mint_token(webhooks_local, secret, org):
    """`webhooks-local token`: an HS256 access token of `org` signed with `secret`, both scopes."""
    env = {"WEBHOOKS_JWT_HS256_SECRET": secret, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([webhooks_local, "token", "--org", org, "--ttl", "1h"], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"webhooks-local token failed: {out.stderr.strip()}")
    return out.stdout.strip()


def signature_ok(webhooks_local, secret, post):
    """`webhooks-local verify`: whether a recorded POST's signature verifies with `secret`."""
    out = subprocess.run([webhooks_local, "verify", "--secret", secret], input=json.dumps(post) + "\n",
                         capture_output=True, text=True)
    return out.returncode == 0
