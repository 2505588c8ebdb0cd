#!/usr/bin/env bash
# The one test command. Installs and starts everything the tests need
# (DynamoDB Local, moto's SQS server, cfn-lint, SAM CLI, playwright-core) under
# .tools/, Debian's Chromium (apt-get) for the console's browser tests and
# Debian's prometheus (apt-get) for the metrics test,
# runs every check, and stops what it started. Needs nothing installed by hand
# beyond the machine's Rust toolchain, python3, node/npm, java 17 and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
# Each step's start, in seconds since the first: where CI's time goes, read off the log.
step() { printf '\n==> [%ss] %s\n' "$(( $(date +%s) - started ))" "$*"; }

# shellcheck source=scripts/emulators.sh
source scripts/emulators.sh
release_pid=
trap 'stop_emulators; [ -z "$release_pid" ] || kill "$release_pid" 2>/dev/null || true' EXIT

step "format"
cargo fmt --all -- --check

step "documents agree with the code (links, configuration, error codes, functions), and each check can fail"
python3 scripts/check-docs.py
python3 scripts/check-docs.py --self-test

step "lint (clippy, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "build"
cargo build --workspace --all-targets --locked

# The release build the quick start needs runs while the debug tests below run, at the
# lowest priority: those tests mostly wait on emulators and sockets, so it takes idle CPU
# (cargo locks target/debug and target/release apart). Waited for before the quick start.
release_log=$(mktemp)
nice -n 19 cargo build --release --locked -p webhooks-local >"$release_log" 2>&1 &
release_pid=$!

step "emulators (DynamoDB Local, moto SQS) and the Standard Webhooks Python library"
start_dynamodb
start_moto
install_verify_tools
echo "DynamoDB Local at $AWS_ENDPOINT_URL_DYNAMODB, moto SQS at $AWS_ENDPOINT_URL_SQS"

step "unit, property, conformance, sample-event and end-to-end tests"
cargo test --workspace --locked

step "end-to-end tests of the API, delivery and tenancy on the AWS backend (DynamoDB Local, moto SQS)"
# `--workspace` (not `-p webhooks-local`): the same features as above, so nothing is rebuilt.
WEBHOOKS_TEST_BACKEND=aws cargo test --workspace --locked --test subscriptions_api --test delivery --test history \
  --test security_tenancy --test secret_rotation --test isolation --test tracing --test notices

step "template lint (cfn-lint, sam validate --lint)"
install_lint_tools
lint_template

step "README quick start and docs/walkthrough.md (release build, as a new user runs them)"
wait "$release_pid" || { cat "$release_log"; echo "release build failed" >&2; exit 1; }
tail -n 1 "$release_log"
scripts/walkthrough.sh
step "metrics scraped by a real Prometheus (Debian's prometheus; apt-get when missing), PromQL checked"
scripts/prometheus-test.sh
step "web console in Chromium (Playwright; installs Chromium and playwright-core)"
scripts/console-test.sh
step "contract (openapi.yaml lint, schemathesis)" && scripts/contract.sh

# Last: it freezes the shared DynamoDB Local and moto (SIGSTOP/SIGCONT) and runs, freezes,
# kills and restarts a moto of its own (local/tests/faults.rs). Both are continued whatever
# happens.
step "fault injection (DynamoDB Local, then moto frozen for 10 s, then moto killed and restarted; figures in docs/performance-history.md)"
fault_rc=0
DYNAMODB_LOCAL_PID="$DYNAMODB_LOCAL_PID" WEBHOOKS_MOTO_SERVER="$WEBHOOKS_TOOLS_DIR/venv/bin/moto_server" \
  WEBHOOKS_TEST_BACKEND=aws cargo test --workspace --locked --test faults -- --ignored --nocapture || fault_rc=$?
[ "$fault_rc" -ne 0 ] || DYNAMODB_LOCAL_PID="$DYNAMODB_LOCAL_PID" MOTO_PID="$MOTO_PID" \
  cargo test --workspace --locked --test lambda_queue_events -- --ignored --nocapture --test-threads=1 || fault_rc=$?
kill -CONT "$DYNAMODB_LOCAL_PID" "$MOTO_PID" 2>/dev/null || true
[ "$fault_rc" -eq 0 ] || { echo "fault injection failed" >&2; exit "$fault_rc"; }

printf '\nall checks passed in %ss\n' "$(( $(date +%s) - started ))"
