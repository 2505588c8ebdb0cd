#!/usr/bin/env python3
"""The design card's local invocation, with the real tool (issue 37): `cargo lambda watch`
serves the functions and `cargo lambda invoke <function> --data-file events/<file>.json`
answers every file of events/ as the handler tests expect.

    lambda-invoke.py --bin-dir DIR              every sample event, invoked and checked
    lambda-invoke.py --bin-dir DIR --self-test  the same, then proof that the check can fail

Needs DynamoDB Local and moto running (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS:
scripts/emulators.sh `start_dynamodb`, `start_moto`), cargo-lambda (CARGO_LAMBDA, from
`install_lambda_tools`, or `cargo-lambda` on PATH) and, in DIR, the functions' binaries and
webhooks-local (`cargo build -p webhooks-local -p <function>...`, scripts/test.sh's build).
Python 3 standard library only. What it does:

1. Fresh tables in DynamoDB Local and a delivery queue in moto, with what the events name
   written by `webhooks-local sample-data` (org-1's subscription 00000000-…-0001 and its
   message msg-1, through the store's own writes) and an API key (`webhooks-local api-keys
   create`); the notification 6c207535-… is made by invoking ingest-events with its event.
2. `cargo lambda watch --only-lambda-apis`: cargo-lambda's Lambda emulator (control plane,
   invoke endpoint, one Runtime API per function). The one Lambda binary, as the build stage
   left it (`webhooks-lambda`), runs once per function with its WEBHOOKS_FUNCTION, as
   template.yaml deploys it, and polls that function's Runtime API
   (AWS_LAMBDA_RUNTIME_API=…/.rt/<function>) with the functions' environment (written to
   lambda.env). Plain `cargo lambda watch` starts a function with `cargo run --bin
   <function>`, and there is no binary of that name (docs/operations.md, "Invoking the
   functions locally").
3. For every events/*.json (alphabetical; EXPECT's `last` ones at the end), `cargo lambda
   invoke <function> --data-file <file>` with the case's expectation: an API Gateway answer's
   status and problem `code`, an SQS batch's failed record ids, an error's text, or values of
   the answer. A file of events/ with no expectation, or an expectation with no file, fails
   the check, naming it (a new sample event cannot be forgotten).

The expectations are the handler tests' (Rust, where each asserts more of its answer, in the
states it sets up): EXPECT holds, once, the status, code or ids each file's answer carries
here, and cites the test that asserts it; a citation of a test that is not in its file, of a
file that does not use the event, or of a problem code the file never asserts fails the check.

--self-test then shows the check failing: an event file with no expectation (a copy of one
under a new name), an expectation with no file, a citation of a missing test and planted
wrong expectations (a status, a problem code, an SQS batch's failures) are each reported,
naming the file.
"""

import argparse
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from harness import Receiver, mint_token, signature_ok

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"
JWT_SECRET = "test-hs256-secret"  # shared/tests/support/lambda.rs
SUBSCRIPTION_ID = "00000000-0000-4000-8000-000000000001"
SECRET = "whsec_c2VlZGVkLXNlY3JldC1mb3ItdGVzdHM="  # local/src/sample_data.rs
NOTIFICATION_ID = "6c207535-4179-5fd6-a332-9fe65e78f76e"  # evt-history-1 for SUBSCRIPTION_ID

# The functions' settings beyond their tables and queues: the handler tests' (callbacks on
# this machine over http for the handshake, shared/tests/support/lambda.rs `config`; the
# HS256 secret; the machine clients of shared/tests/it/lambda_pre_token.rs).
# The one binary of every function (functions/), told which it is by WEBHOOKS_FUNCTION.
LAMBDA_BINARY = "webhooks-lambda"

FUNCTION_ENV = {
    "RUST_LOG": "info",
    "WEBHOOKS_JWT_HS256_SECRET": JWT_SECRET,
    "WEBHOOKS_ALLOW_HTTP_CALLBACKS": "true",
    "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS": "true",
    "WEBHOOKS_HANDSHAKE_TIMEOUT_MS": "3000",
    "WEBHOOKS_MACHINE_CLIENTS": "4machineclient567example=org-m2m,7otherclient=org-2",
}
# What the functions take from this environment: the emulators' endpoints and their dummy
# credentials (scripts/emulators.sh), never anything else of the caller's.
PASSED_ENV = ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ACCESS_KEY_ID",
              "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION",
              "AWS_EC2_METADATA_DISABLED", "PATH")


def case(test, subst=None, **expect):
    """One invocation of a file: `subst` replaces text of the file first (placeholders, as
    the handler test does); the rest is what the answer must carry."""
    return dict(test=test, subst=subst or {}, **expect)


H = "shared/tests/it/lambda_handlers.rs"
HIST = "shared/tests/aws/lambda_history.rs"
HTTP = "shared/tests/aws/lambda_http_api.rs"
QUEUE = "shared/tests/aws/lambda_queue_events/samples.rs"
CONSOLE = "shared/tests/it/lambda_console.rs"
PRE = "shared/tests/it/lambda_pre_token.rs"
TOKEN = {"TOKEN_PLACEHOLDER": "{token}"}
KEY_AND_TOKEN = {"TOKEN_PLACEHOLDER": "{token}", "API_KEY_PLACEHOLDER": "{api_key}"}
CLAIMS = "response.claimsAndScopeOverrideDetails.accessTokenGeneration.claimsToAddOrOverride"

# events/<file>.json -> (function, cases). Every file of events/ has an entry, every entry a
# file. Kinds of expectation: status (+ code: the problem's), json (path -> value), failures
# (an SQS batch's batchItemFailures ids), error (the function's error names it), posted (the
# receiver got a POST with these headers, signed with the subscription's secret).
EXPECT = {
    "authorizer-request": ("authorizer", [
        case(f"{H} authorizer_refuses_missing_bad_and_expired_tokens (placeholder)", error="Unauthorized"),
        case(f"{H} authorizer_allows_a_valid_token_for_the_whole_stage", TOKEN,
             json={"policyDocument.Statement.0.Effect": "Allow", "context.orgId": "org-1"}),
    ]),
    "authorizer-request-no-token": ("authorizer", [
        case(f"{H} authorizer_refuses_missing_bad_and_expired_tokens (no token)", error="Unauthorized"),
    ]),
    "authorizer-http-request": ("authorizer", [
        case(f"{HTTP} a_valid_key_and_token_of_one_organization_are_allowed", KEY_AND_TOKEN,
             json={"isAuthorized": True, "context.orgId": "org-1"}),
        case(f"{HTTP} a_bad_token_with_a_valid_key_is_refused (placeholder)", {"API_KEY_PLACEHOLDER": "{api_key}"},
             json={"isAuthorized": True, "context.status": 401, "context.refusal": "INVALID_TOKEN"}),
    ]),
    "authorizer-http-request-no-key": ("authorizer", [
        case(f"{HTTP} a_missing_unknown_or_forged_key_is_refused", TOKEN,
             json={"isAuthorized": True, "context.status": 403, "context.refusal": "API_KEY_MISSING"}),
    ]),
    "console-page": ("console", [case(f"{CONSOLE} the_page_is_served_without_an_authorizer", status=200)]),
    "console-asset": ("console", [case(f"{CONSOLE} a_file_comes_from_the_proxy_path_parameter", status=200)]),
    "console-missing": ("console", [
        case(f"{CONSOLE} an_unknown_file_is_a_problem_404", status=404, code="ROUTE_NOT_FOUND"),
    ]),
    "create-subscription-ok": ("create-subscription", [
        case(f"{H} create_subscription_ok", {"http://127.0.0.1:9/hook": "{receiver}/hook"}, status=200,
             json={"status": "ACTIVE", "orgId": "org-1", "uri": "{receiver}/hook"}),
    ]),
    "create-subscription-foreign-filter-only": ("create-subscription", [
        case(f"{H} create_subscription_errors", status=403, code="NO_ENABLED_FILTERS"),
    ]),
    "create-subscription-invalid-filter": ("create-subscription", [
        case(f"{H} create_subscription_errors", status=400, code="VALIDATION_FAILED"),
    ]),
    "create-subscription-malformed-json": ("create-subscription", [
        case(f"{H} create_subscription_errors", status=400, code="MALFORMED_JSON"),
    ]),
    "create-subscription-wrong-content-type": ("create-subscription", [
        case(f"{H} create_subscription_errors", status=415, code="UNSUPPORTED_MEDIA_TYPE"),
    ]),
    "list-subscriptions-ok": ("list-subscriptions", [
        case(f"{H} list_subscriptions", status=200,
             json={"sort.0.property": "createdDateTime", "sort.0.direction": "DESC"}),
    ]),
    "list-subscriptions-bare-sort": ("list-subscriptions", [
        case(f"{H} list_subscriptions", status=200, json={"sort": []}),
    ]),
    "list-subscriptions-bad-size": ("list-subscriptions", [
        case(f"{H} list_subscriptions", status=400, code="VALIDATION_FAILED"),
    ]),
    "list-subscriptions-no-authorizer": ("list-subscriptions", [
        case(f"{H} list_subscriptions", status=401, code="INVALID_TOKEN"),
    ]),
    "get-subscription-ok": ("get-subscription", [
        case(f"{H} get_subscription_and_its_secret", status=200,
             json={"id": SUBSCRIPTION_ID, "orgId": "org-1", "status": "ACTIVE"}),
    ]),
    "get-subscription-not-found": ("get-subscription", [
        case(f"{H} get_subscription_and_its_secret", status=404, code="SUBSCRIPTION_NOT_FOUND"),
    ]),
    "get-subscription-http-ok": ("get-subscription", [
        case(f"{HTTP} a_function_behind_the_http_api_serves_the_caller_or_answers_the_refusal", status=200,
             json={"id": SUBSCRIPTION_ID}),
    ]),
    "get-subscription-http-refused": ("get-subscription", [
        case(f"{HTTP} a_function_behind_the_http_api_serves_the_caller_or_answers_the_refusal", status=403,
             code="API_KEY_INVALID"),
    ]),
    "get-destination-identity-ok": ("get-destination-identity", [
        case(f"{H} get_destination_identity", status=200,
             json={"externalId": "webhooks-753fd37d-8f7f-5a84-9e8d-3fd2fbc2cf36"}),
    ]),
    "get-event-type-ok": ("get-destination-identity", [
        case(f"{H} the_event_catalogue_through_the_identity_function", status=200,
             json={"kind": "message.inbound"}),
    ]),
    "get-subscription-secret-ok": ("get-subscription-secret", [
        case(f"{H} get_subscription_and_its_secret", status=200, json={"key": SECRET}),
    ]),
    "rotate-subscription-secret-ok": ("rotate-subscription-secret", [
        case(f"{H} rotate_subscription_secret", status=200,
             json={"key": "whsec_cm90YXRlZC1zZWNyZXQtZm9yLXNhbXBsZS1ldmVudHM="}),
    ]),
    "rotate-subscription-secret-invalid": ("rotate-subscription-secret", [
        case(f"{H} rotate_subscription_secret", status=400, code="VALIDATION_FAILED"),
    ]),
    "delete-subscription-not-found": ("delete-subscription", [
        case(f"{H} delete_subscription", status=404, code="SUBSCRIPTION_NOT_FOUND"),
    ]),
    # Last: the other files name the subscription it deletes.
    "delete-subscription-ok": ("delete-subscription", [case(f"{H} delete_subscription", status=204, last=True)]),
    "get-message-ok": ("get-message", [
        case(f"{H} get_message", status=200, json={"id": "msg-1", "text": "hello"}),
    ]),
    "get-message-not-found": ("get-message", [
        case(f"{H} get_message", status=404, code="MESSAGE_NOT_FOUND"),
    ]),
    "list-notifications-ok": ("list-notifications", [
        case(f"{HIST} list_notifications", status=200, json={"size": 20, "sort.0.property": "createdDateTime"}),
    ]),
    "get-notification-ok": ("get-notification", [
        case(f"{HIST} get_notification_after_ingestion", status=200,
             json={"uuid": NOTIFICATION_ID, "eventId": "evt-history-1", "subscriptionId": SUBSCRIPTION_ID}),
    ]),
    "resend-notification-ok": ("resend-notification", [
        case(f"{HIST} resend_notification", status=202, json={"uuid": NOTIFICATION_ID, "status": "PENDING"}),
    ]),
    # The sample's own window (November 2025) reaches past the retention.
    "recover-notifications-ok": ("recover-notifications", [
        case(f"{HIST} recover_notifications", status=400, code="VALIDATION_FAILED"),
    ]),
    "get-delivery-stats-ok": ("get-delivery-stats", [
        case(f"{HIST} get_delivery_stats", status=200, json={"totals.notifications": 0}),
    ]),
    "ingest-events-sqs": ("ingest-events", [
        case(f"{QUEUE} ingest_events_sample_stores_the_message_and_enqueues_its_notification",
             failures=["22222222-2222-4222-8222-222222222222"]),
    ]),
    "ingest-events-sqs-data-checks": ("ingest-events", [
        case(f"{QUEUE} ingest_events_data_checks_fail_the_record_and_name_the_field",
             failures=["33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444",
                       "66666666-6666-4666-8666-666666666666"]),
    ]),
    "deliver-notifications-sqs": ("deliver-notifications", [
        case(f"{QUEUE} deliver_notifications_retries_with_a_delayed_message_then_delivers_signed",
             {"SUBSCRIPTION_ID_PLACEHOLDER": SUBSCRIPTION_ID}, failures=[],
             posted={"webhook-id": "5d0c3f7e-6a55-5b44-9a3e-6a1f0f4f8e21"}),
    ]),
    "remind-expiring-scheduled": ("remind-expiring", [
        # Nothing expires within the notice here (the test's subscription does: 1).
        case(f"{QUEUE} remind_expiring_sample_tells_the_organization_once", json={"reminded": 0}),
    ]),
    "pre-token-generation-v2": ("pre-token-generation", [
        case(f"{PRE} the_organization_goes_into_the_access_token", json={f"{CLAIMS}.org_id": "org-1"}),
    ]),
    "pre-token-generation-v3-user": ("pre-token-generation", [
        case(f"{PRE} user_tokens_work_the_same_with_v2_and_v3_events", json={f"{CLAIMS}.org_id": "org-1"}),
    ]),
    "pre-token-generation-v3-client-credentials": ("pre-token-generation", [
        case(f"{PRE} a_machine_client_gets_its_organization", json={f"{CLAIMS}.org_id": "org-m2m"}),
    ]),
    "pre-token-generation-v3-unknown-client": ("pre-token-generation", [
        case(f"{PRE} an_unlisted_machine_client_gets_no_token", error="9unlistedclient000example"),
    ]),
}


def log(*args):
    print("lambda-invoke:", *args, flush=True)


class Failure(Exception):
    pass


def coverage(events_dir, expect, root=ROOT):
    """Problems with which files have expectations, and with the tests they cite: each names
    the file. A case cites `<test file> <test function>`: the function must be in that file,
    and the file must name the event and the problem code the case expects."""
    files = {p.stem for p in Path(events_dir).glob("*.json")}
    problems = [f"events/{name}.json: no expectation in scripts/lambda-invoke.py EXPECT (add one: "
                f"the function and what it answers, as its handler test expects)"
                for name in sorted(files - set(expect))]
    problems += [f"events/{name}.json: expected in EXPECT, but there is no such file"
                 for name in sorted(set(expect) - files)]
    for name, (_, cases) in sorted(expect.items()):
        for c in cases:
            path, _, rest = c["test"].partition(" ")
            test = rest.split(" ")[0]
            source = Path(root) / path
            text = source.read_text() if source.is_file() else ""
            if not re.search(rf"\bfn {re.escape(test)}\(", text):
                problems.append(f"events/{name}.json: its expectation cites {c['test']!r}, "
                                f"but {path} has no test `{test}`")
            elif f'"{name}"' not in text:
                problems.append(f"events/{name}.json: its expectation cites {path}, which does not use it")
            elif c.get("code") and f'"{c["code"]}"' not in text:
                problems.append(f"events/{name}.json: expects {c['code']}, which {path} never asserts")
    return problems


# ------------------------------------------------------------------------------------------
# The parts: a callback receiver, the emulator's tables and queues, cargo lambda watch, the
# functions' processes.


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env():
    return {k: v for k, v in os.environ.items() if k in PASSED_ENV}


def prepare(bin_dir, receiver, work):
    """Fresh tables and queues with what the events name; returns the functions' environment
    and the API key."""
    prefix = f"invoke-{uuid.uuid4().hex[:8]}"
    env = dict(base_env(), **FUNCTION_ENV, WEBHOOKS_SUBSCRIPTIONS_TABLE=f"{prefix}-subscriptions",
               WEBHOOKS_MESSAGES_TABLE=f"{prefix}-messages")
    local = str(Path(bin_dir) / "webhooks-local")
    if not Path(local).exists():
        raise Failure(f"no {local} (cargo build -p webhooks-local)")
    out = subprocess.run([local, "sample-data", "--create-tables", "--uri", f"{receiver.base}/seeded"],
                         env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise Failure(f"webhooks-local sample-data failed: {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        name, _, value = line.partition("=")
        env[name] = value
    if "WEBHOOKS_DELIVERY_QUEUE_URL" not in env:
        raise Failure(f"webhooks-local sample-data printed no queue: {out.stdout!r}")
    key = subprocess.run([local, "api-keys", "create", "--org", "org-1"], env=env, capture_output=True,
                         text=True, timeout=60)
    if key.returncode != 0:
        raise Failure(f"webhooks-local api-keys create failed: {key.stderr.strip()}")
    # cargo lambda watch --env-file's format (a value with `=` in it is quoted).
    (Path(work) / "lambda.env").write_text("".join(f'{k}="{v}"\n' for k, v in env.items() if k != "PATH"))
    return env, key.stdout.strip()


def function_manifest(work):
    """The emulator invokes only a function named as a binary of the manifest it is given; every
    function is the one binary webhooks-lambda, so it is given a manifest naming template.yaml's
    functions (its WEBHOOKS_FUNCTION values) as binaries. Nothing builds them: the processes
    the invocations reach are webhooks-lambda's (Watch.start)."""
    names = re.findall(r"^\s+WEBHOOKS_FUNCTION:\s*(\S+)\s*$", (ROOT / "template.yaml").read_text(), re.M)
    folder = Path(work) / "functions-manifest"
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "main.rs").write_text("fn main() {}\n")
    bins = "".join(f'[[bin]]\nname = "{n}"\npath = "src/main.rs"\n\n' for n in sorted(set(names)))
    manifest = folder / "Cargo.toml"
    manifest.write_text(f'[package]\nname = "functions"\nversion = "0.0.0"\nedition = "2021"\n\n{bins}[workspace]\n')
    return manifest


class Watch:
    """`cargo lambda watch --only-lambda-apis` on a free port, and the functions' binaries
    started on their first invocation against its Runtime API."""

    def __init__(self, cargo_lambda, bin_dir, env, work):
        self.cargo_lambda, self.bin_dir, self.env, self.work = cargo_lambda, Path(bin_dir), env, Path(work)
        self.functions = {}
        # A port picked free can be taken before the watch binds it (any outbound connection
        # may get it as its own): a lost race is tried again on another port.
        for attempt in range(3):
            self.port = free_port()
            if self._listen() or attempt == 2:
                break
        if self.process.poll() is not None:
            raise Failure(f"cargo lambda watch exited ({self.process.returncode}): "
                          f"{(self.work / 'cargo-lambda-watch.log').read_text()[-1500:]}")

    def _listen(self):
        """Starts the watch on self.port; False if it lost the port to another process."""
        log_path = self.work / "cargo-lambda-watch.log"
        self.log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [self.cargo_lambda, "lambda", "watch", "--only-lambda-apis", "--invoke-address", "127.0.0.1",
             "--invoke-port", str(self.port), "--manifest-path", str(function_manifest(self.work))],
            cwd=ROOT, env=dict(os.environ, NO_COLOR="1"), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.time() + 30
        while True:
            if self.process.poll() is not None:
                return "address already in use" not in log_path.read_text(errors="replace").lower()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                if time.time() > deadline:
                    raise Failure(f"cargo lambda watch did not listen on 127.0.0.1:{self.port} within 30 s")
                time.sleep(0.1)

    def start(self, function):
        """The function's binary, polling its own Runtime API of the watch."""
        if function in self.functions and self.functions[function][0].poll() is None:
            return
        binary = self.bin_dir / LAMBDA_BINARY
        if not binary.exists():
            raise Failure(f"no binary {binary} (cargo build -p {LAMBDA_BINARY})")
        env = dict(self.env, WEBHOOKS_FUNCTION=function,
                   AWS_LAMBDA_RUNTIME_API=f"http://127.0.0.1:{self.port}/.rt/{function}",
                   AWS_LAMBDA_FUNCTION_NAME=function, AWS_LAMBDA_FUNCTION_VERSION="1",
                   AWS_LAMBDA_FUNCTION_MEMORY_SIZE="128")
        log_file = open(self.work / f"{function}.log", "ab")
        self.functions[function] = (subprocess.Popen([str(binary)], env=env, stdout=log_file,
                                                     stderr=subprocess.STDOUT), log_file)

    def invoke(self, function, data_file):
        """`cargo lambda invoke`: (exit code, stdout, stderr)."""
        command = [self.cargo_lambda, "lambda", "invoke", function, "--invoke-address", "127.0.0.1",
                   "--invoke-port", str(self.port), "--data-file", str(data_file), "--output-format", "json"]
        invocation = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=dict(os.environ, NO_COLOR="1"))
        self.start(function)
        try:
            out, err = invocation.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            invocation.kill()
            raise Failure(f"cargo lambda invoke {function} --data-file {data_file}: no answer in 60 s; "
                          f"the function's log: {self.tail(function)}")
        return invocation.returncode, out, err

    def tail(self, function):
        path = self.work / f"{function}.log"
        return path.read_text(errors="replace")[-1500:] if path.exists() else "(none)"

    def stop(self):
        for process, log_file in self.functions.values():
            process.kill()
            process.wait()
            log_file.close()
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()


# ------------------------------------------------------------------------------------------
# The check


def at(value, path):
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return "(absent)"
    return value


def check_answer(c, rc, out, err, values, receiver):
    """What is wrong with one answer (empty when nothing)."""
    fill = (lambda v: v.format(**values) if isinstance(v, str) else v)
    if "error" in c:
        text = out + err
        if rc == 0 and '"errorMessage"' not in out:
            return [f"answered {out.strip()[:300]!r}, expected an error naming {c['error']!r}"]
        return [] if c["error"] in text else [f"the error does not name {c['error']!r}: {text.strip()[:300]}"]
    if rc != 0:
        return [f"cargo lambda invoke failed ({rc}): {(err or out).strip()[:500]}"]
    try:
        answer = json.loads(out)
    except ValueError:
        return [f"not JSON: {out.strip()[:300]!r}"]
    problems = []
    body = answer
    if "status" in c:
        status = answer.get("statusCode") if isinstance(answer, dict) else None
        text = answer.get("body") or "" if isinstance(answer, dict) else ""
        if isinstance(answer, dict) and answer.get("isBase64Encoded"):
            text = base64.b64decode(text).decode(errors="replace")
        try:
            body = json.loads(text) if text.strip() else None
        except ValueError:
            body = text
        got_code = body.get("code") if isinstance(body, dict) else None
        if status != c["status"] or got_code != c.get("code"):
            problems.append(f"answered {status} {got_code or ''}, expected {c['status']} {c.get('code') or ''}"
                            f": {' '.join(text.split())[:200]}")
            return problems
    if "failures" in c:
        got = [f.get("itemIdentifier") for f in (answer or {}).get("batchItemFailures", [])]
        if got != c["failures"]:
            problems.append(f"batchItemFailures {got}, expected {c['failures']}")
    for path, want in c.get("json", {}).items():
        got = at(body, path)
        if got != fill(want):
            problems.append(f"{path} is {got!r}, expected {fill(want)!r}")
    if "posted" in c:
        post = receiver.wait_for(lambda _, h: all(h.get(k) == v for k, v in c["posted"].items()))
        if post is None:
            problems.append(f"the callback got no POST with {c['posted']}")
        elif not signature_ok(receiver.webhooks_local, SECRET, post):
            problems.append("the POST's signature does not verify with the subscription's secret")
    return problems


def seed_notification(watch, work):
    """The notification the history events name: ingest-events given evt-history-1 (the
    event shared/tests/aws/lambda_history.rs ingests) as an SQS record."""
    event = json.loads((EVENTS / "ingest-events-sqs.json").read_text())
    record = event["Records"][0]
    record["messageId"] = str(uuid.uuid4())
    record["body"] = json.dumps({
        "eventId": "evt-history-1", "type": "message.inbound", "organizationId": "org-1",
        "departmentId": "dep-1", "carrierMessageId": "carrier-history-1", "status": "RECEIVED",
        "message": {"id": "msg-history-1", "direction": "in", "to": ["+15550100"], "from": "+15550199",
                    "text": "Hello from the history test"},
    })
    event["Records"] = [record]
    path = Path(work) / "seed-evt-history-1.json"
    path.write_text(json.dumps(event))
    rc, out, err = watch.invoke("ingest-events", path)
    if rc != 0 or json.loads(out).get("batchItemFailures"):
        raise Failure(f"seeding the history's notification through ingest-events failed: {out}{err}")


def run_cases(watch, receiver, values, expect, work, failed="FAILED"):
    """Invokes every case; returns (problems, number of invocations)."""
    order = sorted(expect, key=lambda n: (any(c.get("last") for c in expect[n][1]), n))
    problems, count = [], 0
    for name in order:
        function, cases = expect[name]
        for i, c in enumerate(cases):
            data_file = EVENTS / f"{name}.json"
            what = f"events/{name}.json"
            if c["subst"]:
                text = data_file.read_text()
                for old, new in c["subst"].items():
                    if old not in text:
                        problems.append(f"{what}: has no {old} to replace")
                    text = text.replace(old, new.format(**values))
                data_file = Path(work) / f"{name}.{i}.json"
                data_file.write_text(text)
                what += f" ({', '.join(c['subst'])} replaced)"
            started = time.time()
            rc, out, err = watch.invoke(function, data_file)
            count += 1
            wrong = check_answer(c, rc, out, err, values, receiver)
            took = f"{(time.time() - started) * 1000:.0f} ms"
            if wrong:
                problems += [f"{what} -> {function}: {w} (expected by {c['test']})" for w in wrong]
                log(f"{failed} {what} -> {function} ({took}): {'; '.join(wrong)}")
            else:
                log(f"ok {what} -> {function} ({took})")
    return problems, count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", required=True, help="the functions' binaries and webhooks-local")
    parser.add_argument("--cargo-lambda", default=os.environ.get("CARGO_LAMBDA") or shutil.which("cargo-lambda"))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    for var, how in (("AWS_ENDPOINT_URL_DYNAMODB", "start_dynamodb"), ("AWS_ENDPOINT_URL_SQS", "start_moto")):
        if var not in os.environ:
            sys.exit(f"lambda-invoke: {var} is not set: the emulator is not running "
                     f"(source scripts/emulators.sh; {how})")
    if not args.cargo_lambda or not Path(args.cargo_lambda).exists():
        sys.exit("lambda-invoke: cargo-lambda not found (source scripts/emulators.sh; install_lambda_tools "
                 "exports CARGO_LAMBDA; or pip install cargo-lambda==1.9.2)")
    problems = coverage(EVENTS, EXPECT)
    if problems:
        sys.exit("lambda-invoke: FAILED:\n  " + "\n  ".join(problems))
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="lambda-invoke-") as work:
        receiver = Receiver(str(Path(args.bin_dir) / "webhooks-local"), work)
        watch = None
        try:
            env, api_key = prepare(args.bin_dir, receiver, work)
            log(f"tables {env['WEBHOOKS_SUBSCRIPTIONS_TABLE']}, {env['WEBHOOKS_MESSAGES_TABLE']} and queue "
                f"{env['WEBHOOKS_DELIVERY_QUEUE_URL']} with the sample data ({time.time() - started:.1f} s)")
            watch = Watch(args.cargo_lambda, args.bin_dir, env, work)
            log(f"cargo lambda watch --only-lambda-apis on 127.0.0.1:{watch.port}")
            values = {"receiver": receiver.base, "token": mint_token(receiver.webhooks_local, JWT_SECRET, "org-1"), "api_key": api_key}
            seed_notification(watch, work)
            problems, count = run_cases(watch, receiver, values, EXPECT, work)
            if problems:
                sys.exit(f"lambda-invoke: FAILED ({len(problems)} of {count} invocations; logs were in "
                         f"{work}):\n  " + "\n  ".join(problems))
            log(f"{count} invocations of {len(EXPECT)} event files by cargo lambda invoke, each answered as "
                f"its handler test expects ({time.time() - started:.1f} s)")
            if args.self_test:
                self_test(watch, receiver, values, work)
        except Failure as e:
            sys.exit(f"lambda-invoke: FAILED: {e}")
        finally:
            if watch is not None:
                watch.stop()
            receiver.stop()
    log(f"passed in {time.time() - started:.1f} s")


def self_test(watch, receiver, values, work):
    # A new event file with no expectation: reported, naming it, before anything is invoked.
    events = Path(work) / "events"
    shutil.copytree(EVENTS, events)
    shutil.copy(events / "get-subscription-ok.json", events / "get-subscription-planted.json")
    problems = coverage(events, EXPECT)
    if not any("events/get-subscription-planted.json: no expectation" in p for p in problems):
        sys.exit(f"lambda-invoke: self-test FAILED: a file with no expectation was not reported: {problems}")
    log(f"self-test: {problems[0]}")
    # An expectation whose file is gone.
    (events / "get-subscription-planted.json").unlink()
    (events / "console-page.json").unlink()
    problems = coverage(events, EXPECT)
    if not any("events/console-page.json: expected in EXPECT, but there is no such file" in p for p in problems):
        sys.exit(f"lambda-invoke: self-test FAILED: an expectation with no file was not reported: {problems}")
    log(f"self-test: {problems[0]}")
    # An expectation citing a test that is not there (renamed, say).
    cited = dict(EXPECT, **{"get-message-ok": ("get-message", [case(f"{H} get_message_renamed", status=200)])})
    problems = coverage(EVENTS, cited)
    if not any(p.startswith("events/get-message-ok.json: its expectation cites") for p in problems):
        sys.exit(f"lambda-invoke: self-test FAILED: a citation of a missing test was not reported: {problems}")
    log(f"self-test: {problems[0]}")
    # Planted wrong expectations: a status (the page answers 200), a problem code
    # (MESSAGE_NOT_FOUND), an SQS batch's failures (one record fails).
    planted = {
        "console-page": ("console", [case("planted", status=404, code="ROUTE_NOT_FOUND")]),
        "get-message-not-found": ("get-message", [case("planted", status=404, code="SUBSCRIPTION_NOT_FOUND")]),
        "ingest-events-sqs": ("ingest-events", [case("planted", failures=[])]),
    }
    problems, _ = run_cases(watch, receiver, values, planted, work, failed="self-test: reported")
    for name in planted:
        if not any(p.startswith(f"events/{name}.json") for p in problems):
            sys.exit(f"lambda-invoke: self-test FAILED: the planted expectation of {name} was not reported: "
                     f"{problems}")
    log(f"self-test: each planted wrong expectation reported, naming its file ({len(problems)} problems)")


if __name__ == "__main__":
    main()
