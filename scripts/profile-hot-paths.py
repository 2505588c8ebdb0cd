#!/usr/bin/env python3
"""Instructions per request of `webhooks-local`, counted by the CPU (`perf stat -e
instructions` attached to the server), which holds on a noisy machine where timings do
not. Usage:

    scripts/profile-hot-paths.py [--bin target/release/webhooks-local] [--requests 4000]

Starts the server on a temp data dir and a callback receiver (`webhooks-local listen`), creates one
subscription, then for each scenario sends the requests one after another over one
keep-alive connection and divides the server's instructions by the requests:

- get: GET /webhooksubscription/{id} (same token every time)
- list: GET /webhooksubscription/all?page=0&size=20, the organization holding 1,000
  (`LIST_PATH` in the environment names another page, e.g.
  `/webhooksubscription/all?page=7&size=20&sort=createdDateTime,desc`)
- ingest: POST /events, fan-out 1, counted until every notification arrived (so it holds
  ingestion, delivery and the outcome's record)

The server's idle work over the same wall time (delivery poll, purges) is subtracted.
With `--record DIR`, also writes `perf record` profiles of each scenario there.
With `--callgrind`, the server runs under valgrind's callgrind and the instructions are
counted there (zeroed and dumped around each scenario with `callgrind_control`): for a
machine whose CPU counters perf cannot read (a VM), slower but exact. Settings such as
`WEBHOOKS_METRICS_ADDR` or `OTEL_EXPORTER_OTLP_ENDPOINT` pass through the environment."""

import argparse, glob, http.client, json, os, signal
import subprocess, tempfile, threading, time

from harness import Receiver, mint_token

class Perf:
    """`perf stat` (and optionally `perf record`) attached to a process."""

    def __init__(self, pid, record=None):
        self.out = tempfile.NamedTemporaryFile(suffix=".perf", delete=False).name
        # PERF_EVENT=task-clock (CPU milliseconds) where a VM has no hardware counters.
        self.event = os.environ.get("PERF_EVENT", "instructions")
        cmd = ["perf", "stat", "-x,", "-e", self.event, "-o", self.out, "-p", str(pid)]
        self.stat = subprocess.Popen(cmd)
        self.record = None
        if record:
            self.record = subprocess.Popen(["perf", "record", "-q"] + os.environ.get("PERF_RECORD", "-g").split() + [ "-o", record, "-p", str(pid)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)

    def stop(self):
        for p in (self.stat, self.record):
            if p:
                p.send_signal(signal.SIGINT)
                p.wait()
        for line in open(self.out):
            parts = line.split(",")
            if len(parts) > 2 and parts[2].startswith(self.event):
                return float(parts[0])
        raise RuntimeError(open(self.out).read())


class Callgrind:
    """Instructions counted by callgrind in a server started under it."""

    def __init__(self, pid, out):
        self.pid, self.out, self.event = pid, out, "instructions"
        subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)

    def stop(self):
        before = set(glob.glob(self.out + ".*"))
        subprocess.run(["callgrind_control", "-d", str(self.pid)], check=True, capture_output=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            new = set(glob.glob(self.out + ".*")) - before
            for path in new:
                for line in open(path):
                    if line.startswith(("totals:", "summary:")):
                        return int(line.split()[1])
            time.sleep(0.2)
        raise RuntimeError("callgrind wrote no dump")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/webhooks-local")
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--record", help="directory for perf record profiles")
    ap.add_argument("--log", default="info", help="RUST_LOG of the server")
    ap.add_argument("--callgrind", action="store_true", help="count under valgrind's callgrind")
    args = ap.parse_args()

    data = tempfile.mkdtemp()
    recv = Receiver(args.bin, data)
    key, secret = "profile-key", "profile-secret-0123456789abcdef"
    env = dict(os.environ, WEBHOOKS_API_KEYS=key, WEBHOOKS_JWT_HS256_SECRET=secret, RUST_LOG=args.log)
    env.pop("WEBHOOKS_BACKEND", None)
    cg_out = data + "/callgrind.out"
    under = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + cg_out] if args.callgrind else []
    server = subprocess.Popen(under + [args.bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", data + "/data"],
                              env=env, stdout=subprocess.PIPE, stderr=open(data + "/server.log", "w"), text=True)
    try:
        addr = None
        for line in server.stdout:
            if line.startswith("webhooks-local listening on http://"):
                addr = line.split("http://")[1].split("/")[0]
                break
        threading.Thread(target=lambda: server.stdout.read(), daemon=True).start()
        host, port = addr.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port))
        org = "prof"
        headers = {"x-api-key": key, "authorization": "Bearer " + mint_token(args.bin, secret, org),
                   "content-type": "application/json"}

        def call(method, path, body=None, expect=200):
            conn.request(method, "/prod" + path, body=body, headers=headers)
            r = conn.getresponse()
            payload = r.read()
            if r.status != expect:
                raise RuntimeError(f"{method} {path}: {r.status} {payload[:300]}")
            return payload

        filt = f"/orgId/{org}/department/d/message?direction=inbound"
        uri = f"{recv.base}/hook"
        sub = json.loads(call("POST", "/webhooksubscription",
                              json.dumps({"uri": uri, "eventFilters": [filt], "expiresDateInMillies": 0})))["id"]

        def event(i, tag):
            return json.dumps({"eventId": f"{tag}-{i}", "type": "message.inbound", "organizationId": org,
                               "departmentId": "d", "message": {"id": f"{tag}-m{i}", "to": ["+15550100"],
                               "from": "+15550199", "text": f"benchmark message {i}"},
                               "carrierMessageId": f"carrier-{i}", "status": "RECEIVED"})

        def get(n):
            for _ in range(n):
                call("GET", f"/webhooksubscription/{sub}")

        list_path = os.environ.get("LIST_PATH", "/webhooksubscription/all?page=0&size=20")

        def list_page(n):
            for _ in range(n):
                call("GET", list_path)

        def ingest(n, tag):
            start = recv.count()
            for i in range(n):
                call("POST", "/events", event(i, tag), expect=202)
            deadline = time.time() + 60
            while recv.count() - start < n and time.time() < deadline:
                time.sleep(0.01)
            if recv.count() - start < n:
                raise RuntimeError(f"only {recv.count() - start} of {n} notifications arrived")

        # 999 more for the list, on a filter no event matches (fan-out stays 1).
        other = f"/orgId/{org}/department/other/message?direction=inbound"
        for i in range(999):
            call("POST", "/webhooksubscription",
                 json.dumps({"uri": f"{uri}/{i}", "eventFilters": [other], "expiresDateInMillies": 0}))
        get(300)
        list_page(300)
        ingest(300, "warm")
        n = args.requests
        results = {}
        for name, run in [("get subscription", lambda: get(n)),
                          ("list (page of 20 of 1,000)", lambda: list_page(n)),
                          ("ingest + delivery (fan-out 1)", lambda: ingest(n, "timed"))]:
            record = args.record and os.path.join(args.record, name.split()[0] + ".data")
            meter = (lambda: Callgrind(server.pid, cg_out)) if args.callgrind else (lambda: Perf(server.pid))
            perf = Callgrind(server.pid, cg_out) if args.callgrind else Perf(server.pid, record)
            t0 = time.time()
            run()
            wall = time.time() - t0
            busy = perf.stop()
            perf = meter()
            time.sleep(wall)
            idle = perf.stop()
            results[name] = (busy - idle) / n
            figure = f"{results[name]:,.0f}" if perf.event == "instructions" else f"{results[name]:,.4f}"
            print(f"{name}: {figure} {perf.event} per request "
                  f"({busy:,} in {wall:.1f} s, idle {idle:,})", flush=True)
    finally:
        server.terminate()
        server.wait()
        recv.stop()


if __name__ == "__main__":
    main()
