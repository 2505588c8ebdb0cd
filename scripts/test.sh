#!/usr/bin/env bash
# The test command (CONTRIBUTING.md, "Tests"). Two tiers:
#
#   ./scripts/test.sh          tier 2, what CI runs on every commit (.ci/run): `cargo test`'s
#                              tests, the AWS backend on DynamoDB Local and moto, every lint,
#                              the template checks, the walkthrough, the console in Chromium,
#                              Prometheus and the contract, each at the size that proves it.
#   ./scripts/test.sh --full   tier 3: the same at full size (floods of 2,000, the 1,000-event
#                              kill test, the contract's full example count), plus fault
#                              injection, a release build with the walkthrough run on it and a
#                              short benchmark run. Run it before resolving an issue that
#                              touches delivery, ingestion, an adapter or the request path.
#
# (Tier 1 is plain `cargo test`: no emulator, no network.)
#
# Installs and starts what the tests need, under ~/.cache/webhooks/tools (outside the clone,
# so the next clone finds it; WEBHOOKS_TOOLS_DIR overrides): DynamoDB Local, moto, cfn-lint,
# SAM CLI, schemathesis, cargo-lambda, playwright-core; and Debian's chromium and prometheus
# (apt-get) when missing. Stops what it started. Needs the machine's Rust toolchain with
# cargo-nextest, python3, node/npm, java 17 and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

full=0
case "${1:-}" in
    --full) full=1 ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--full]" >&2; exit 2 ;;
esac

started=$(date +%s)
# Each step's start, in seconds since the first: where the time goes, read off the log.
step() { printf '\n==> [%ss] %s\n' "$(( $(date +%s) - started ))" "$*"; }
# joined PID LOG WHAT: waits for work run beside the steps (process PID, its output in LOG),
# prints its log, and fails the run with its status if it failed.
joined() {
    local rc=0
    wait "$1" || rc=$?
    cat "$2"
    [ "$rc" -eq 0 ] || { echo "test.sh: $3 failed (its log above)" >&2; exit "$rc"; }
}

command -v cargo-nextest >/dev/null 2>&1 || {
    echo "test.sh: cargo-nextest not found (cargo install cargo-nextest --locked)" >&2
    exit 1
}

# Clippy lints the workspace's crates as they compile for the tests, instead of a `cargo
# clippy` of its own: `cargo clippy` is `cargo check` with clippy-driver wrapping rustc for
# workspace members, and a check compiles every dependency a second time (metadata only), the
# largest step on a fresh machine. With the same wrapper and arguments set here (what
# cargo-clippy sets), the dependencies are compiled once and shared; every workspace crate
# goes through clippy-driver, warnings are errors. Every cargo command below inherits it, so
# none recompiles a crate the tests built (the wrapper is part of a crate's fingerprint).
clippy_driver="$(rustc --print sysroot)/bin/clippy-driver"
[ -x "$clippy_driver" ] || {
    echo "test.sh: clippy not found at $clippy_driver (rustup component add clippy)" >&2
    exit 1
}
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

# shellcheck source=scripts/emulators.sh
source scripts/emulators.sh
tools_pid=
docs_pid=
apart_pid=
trap 'stop_emulators; for p in $tools_pid $docs_pid; do kill "$p" 2>/dev/null || true; done; [ -z "$apart_pid" ] || kill -- -"$apart_pid" 2>/dev/null || true' EXIT

target="${CARGO_TARGET_DIR:-target}"
bin="$target/debug/webhooks-local"
# Every cargo command below builds the default members (Cargo.toml) with the same features,
# so nothing is compiled twice.
nextest=(cargo nextest run --locked --profile ci)
# `cargo test`'s targets (tier 1), and the targets with tests that need the emulators: `it`
# again on the AWS backend, and `aws` (`test = false`, so `--tests` leaves it out).
tier1=(--lib --bins --tests)
emulated=(--test it --test aws)
if [ "$full" = 1 ]; then
    export WEBHOOKS_TEST_FULL=1 # testkit::size: full-size floods and kill tests
fi

# Tools are installed (first run) or found (later runs) in the background while cargo
# compiles: on a fresh machine the downloads and the compiling overlap.
tools_log=$(mktemp)
(install_test_tools && scripts/console-test.sh --install-only) >"$tools_log" 2>&1 &
tools_pid=$!
tools_ready() {
    wait "$tools_pid" || { cat "$tools_log" >&2; echo "test.sh: installing the test tools failed" >&2; exit 1; }
}

step "format"
cargo fmt --all -- --check

step "documents agree with the code, and each check can fail (beside the build and tier 1; their log follows them)"
docs_log=$(mktemp)
(python3 scripts/check-docs.py && python3 scripts/check-docs.py --self-test) >"$docs_log" 2>&1 &
docs_pid=$!

step "build the tests, clippy linting every crate of the workspace as it compiles (warnings are errors)"
# The packages of the binaries built after the tests (the last build of this step).
binaries=(webhooks-local webhooks-bench webhooks-lambda)
# Together the builds below compile every target `cargo clippy --workspace --all-targets`
# and `--test aws` check: the default members' libraries (also in test mode), binaries and
# tests, and the other members' binaries through the last build (a library through the crates
# that use it). Checked, so that a new member or target is not left unlinted:
cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
m = json.load(sys.stdin)
built = set(sys.argv[1:])
for p in m["packages"]:
    name, kinds = p["name"], {k for t in p["targets"] for k in t["kind"]}
    if kinds & {"bench", "example"}:
        sys.exit(f"test.sh: {name} has benches or examples, which no build below lints")
    if p["id"] not in m["workspace_default_members"] and name not in built and kinds != {"lib"}:
        sys.exit(f"test.sh: {name} is neither a default member nor built below, so unlinted")
' "${binaries[@]}"
# The binaries built after the tests reuse every dependency the tests compiled only if both
# builds resolve the same features (scripts/one-feature-set.py says which differ).
python3 scripts/one-feature-set.py "${binaries[@]}"
python3 scripts/one-feature-set.py --self-test
"${nextest[@]}" --no-run "${tier1[@]}"
"${nextest[@]}" --no-run "${emulated[@]}"
# The Lambda binary of every function, for the deploy rehearsal and the local invocation (with
# webhooks-local and webhooks-bench's lambda-runtime, the fake Runtime API): the tests'
# feature set (checked above), so only these binaries are compiled and linked.
cargo build --locked "${binaries[@]/#/--package=}"

step "emulators (DynamoDB Local, moto) and the Standard Webhooks Python library"
tools_ready
start_dynamodb
start_moto
install_verify_tools
echo "DynamoDB Local at $AWS_ENDPOINT_URL_DYNAMODB, moto at $AWS_ENDPOINT_URL_SQS"

# The checks of the single-process binary on SQLite need neither emulator: they run in a
# second lane beside tier 1 and the emulators' tests, which spend much of their time waiting
# (on timers, on DynamoDB Local and moto), so the two lanes share the two cores. The second
# lane runs at nice 10: it takes the idle time and the emulators' tests keep theirs (some
# need a delivery rate: at equal priority, a rate-limit test on the AWS backend fell to 4.88
# of its 10 a second while the template lint ran). Its output is printed when it is done; a
# failure in either lane fails the run (the trap stops the other lane).
apart() {
    step "template lint (cfn-lint, sam validate --lint)"
    lint_template

    step "README quick start and docs/walkthrough.md (the debug binary the tests built)"
    WEBHOOKS_LOCAL_BIN="$bin" scripts/walkthrough.sh

    step "metrics scraped by a real Prometheus, PromQL checked"
    WEBHOOKS_LOCAL_BIN="$bin" scripts/prometheus-test.sh

    step "web console in Chromium (Playwright)"
    WEBHOOKS_LOCAL_BIN="$bin" scripts/console-test.sh

    step "contract (openapi.yaml lint, schemathesis)"
    # Every commit: 20 examples per operation and phase; the full tier: 100.
    WEBHOOKS_LOCAL_BIN="$bin" CONTRACT_MAX_EXAMPLES="${CONTRACT_MAX_EXAMPLES:-$([ "$full" = 1 ] && echo 100 || echo 20)}" \
        scripts/contract.sh
}
apart_log=$(mktemp)
set -m # the lane in a process group of its own, so the trap stops all of it
(renice -n 10 -p "$BASHPID" >/dev/null && apart) >"$apart_log" 2>&1 &
apart_pid=$!
set +m
apart_steps="template lint, walkthrough, Prometheus, console, contract"
echo "(the second lane: $apart_steps, beside tier 1 and the emulators' tests; its log follows them)"

step "tier 1: unit, property, conformance, handler and end-to-end tests (SQLite)"
"${nextest[@]}" "${tier1[@]}"

step "documents (checked beside the build and tier 1)"
joined "$docs_pid" "$docs_log" "the documents' check"
docs_pid=

step "the DynamoDB and SQS adapters, and the tests where the backend matters again on the AWS backend"
# The tests where the backend matters (webhooks-local end to end, the Lambda handlers) run
# on SQLite above and on DynamoDB Local and moto here; CONTRIBUTING.md's table lists them.
on_both_backends='(binary_id(webhooks-local::it) & test(/^(subscriptions_api|delivery|history|security_tenancy|secret_rotation|isolation|scheduling|ordering|rate_limit|payload_filter|retry_schedule|signatures_v1a|custom_headers|otlp_tracing|notices|shutdown)::/))'
on_both_backends+=' | (binary_id(webhook-core::it) & test(/^lambda_handlers::/))'
WEBHOOKS_TEST_BACKEND=aws "${nextest[@]}" "${emulated[@]}" -E "binary_id(webhook-core::aws) | $on_both_backends"

step "AWS destinations (moto's STS, SQS, EventBridge and CloudFormation), on both backends"
# `#[ignore]`d in plain `cargo test`, which has no moto (local/tests/it/destinations.rs).
"${nextest[@]}" --test it --run-ignored only -E 'test(/^destinations::/)'
WEBHOOKS_TEST_BACKEND=aws "${nextest[@]}" --test it --run-ignored only -E 'test(/^destinations::/)'

step "differential: random sequences on SQLite, the AWS backend and the Lambda handlers, against the model"
# `#[ignore]`d in plain `cargo test` (it needs the emulators for two of its three runtimes);
# prints how many sequences and operations it ran (the full tier: ten times as many); the
# Lambda handlers' metric lines (EMF, one JSON object a line) are left out of the log.
"${nextest[@]}" --test it --run-ignored only --no-capture -E 'test(/^differential::/)' 2>&1 | grep -v '^{"'

# After the destinations' tests: the stacks it creates in moto's CloudFormation make moto's
# model data, which those tests read, answer 500 (seen when it ran in the second lane).
step "deploy rehearsal: the template transformed and created in moto, every function's binary run with the stack's environment, its AWS calls against its role (least privilege), and each check's self-test"
"$(deploy_python)" scripts/deploy-rehearsal.py --bin-dir "$target/debug" --self-test

step "local invocation: cargo lambda watch serves the functions' binaries, cargo lambda invoke answers every file of events/ as the handler tests expect, and the check's self-test"
install_lambda_tools # exports CARGO_LAMBDA (installed with the other tools above)
python3 scripts/lambda-invoke.py --bin-dir "$target/debug" --cargo-lambda "$CARGO_LAMBDA" --self-test

step "the second lane ($apart_steps)"
joined "$apart_pid" "$apart_log" "the second lane"
apart_pid=

if [ "$full" = 1 ]; then
    step "fixed source addresses: the template linted and the deploy rehearsed with FixedSourceAddresses=true"
    # sam validate takes no parameters: it lints a copy whose default is true.
    fixed_template=$(mktemp --suffix .yaml)
    sed '/^  FixedSourceAddresses:$/,/^    Default:/s/^    Default: "false"$/    Default: "true"/' \
        template.yaml >"$fixed_template"
    ! cmp -s template.yaml "$fixed_template" || { echo "test.sh: FixedSourceAddresses' default not found" >&2; exit 1; }
    lint_template "$fixed_template"
    rm -f "$fixed_template"
    "$(deploy_python)" scripts/deploy-rehearsal.py --bin-dir "$target/debug" --parameter FixedSourceAddresses=true

    # They freeze the shared DynamoDB Local and moto (SIGSTOP/SIGCONT), and run, freeze, kill
    # and restart a moto of their own, so they run alone, after everything else. Both
    # emulators are continued whatever happens.
    step "fault injection (DynamoDB Local, then moto frozen; moto killed and restarted)"
    fault_rc=0
    DYNAMODB_LOCAL_PID="$DYNAMODB_LOCAL_PID" MOTO_PID="$MOTO_PID" WEBHOOKS_MOTO_SERVER="$(moto_command)" \
        WEBHOOKS_TEST_BACKEND=aws "${nextest[@]}" "${emulated[@]}" --run-ignored only --test-threads 1 --no-capture \
        -E 'test(/^faults::/) | test(/while_.*_is_frozen/)' || fault_rc=$?
    kill -CONT "$DYNAMODB_LOCAL_PID" "$MOTO_PID" 2>/dev/null || true
    [ "$fault_rc" -eq 0 ] || { echo "fault injection failed" >&2; exit "$fault_rc"; }

    step "release build, and the README quick start and walkthrough on it"
    # The two binaries scripts/bench.sh builds, with the same features, so the benchmark
    # below compiles nothing more.
    cargo build --release --locked -p webhooks-local -p webhooks-bench
    WEBHOOKS_LOCAL_BIN="$target/release/webhooks-local" scripts/walkthrough.sh

    step "benchmark smoke run (scripts/bench.sh noisy, short; results in target/bench-partial/)"
    scripts/bench.sh noisy --noisy-flood 200 --noisy-quiet 3s --noisy-flood-phase 5s --noisy-grace 30s
fi

printf '\nall checks passed in %ss\n' "$(( $(date +%s) - started ))"
