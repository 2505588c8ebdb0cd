#!/usr/bin/env bash
# The benchmarks of BENCHMARKS.md in one command: builds the release binaries, starts
# DynamoDB Local and moto's SQS (as scripts/test.sh does, under ~/.cache/webhooks/tools), runs
# webhooks-bench, and stops what it started. Results: results.json, results.md and
# latency.svg, in bench/results/ for a full run (every suite: the run BENCHMARKS.md
# reports) and in target/bench-partial/ for a run of some suites, so a partial run never
# replaces the full one (--out DIR writes elsewhere; --out bench/results only when meant).
# Not part of CI: it takes 10 to 20 minutes on 2 cores.
#
#   scripts/bench.sh --zips                  # a full run: arm64 Lambda zips first (cargo lambda)
#   scripts/bench.sh                         # every suite, without building the zips
#   scripts/bench.sh api e2e --duration 5s   # other arguments go to webhooks-bench
#
#   scripts/bench.sh noisy                   # tenant isolation, embedded backend: builds only
#                                            # webhooks-local and webhooks-bench, no emulators
#   scripts/bench.sh noisy --noisy-backend embedded --noisy-backend aws   # and on the emulators
#   scripts/bench.sh noisy --noisy-env WEBHOOKS_DELIVERY_CONCURRENCY=64   # the same, other settings
#
# webhooks-bench --help lists the suites (api, e2e, lambda, fanout, sizes, cost, noisy) and settings.
# The cost suite runs webhooks-local --backend aws and the ingest-events function behind
# recording proxies (50 operations per phase by default: about a minute on 2 cores;
# --cost-operations changes it, --cost-events-per-send the producer's batch).
set -euo pipefail
cd "$(dirname "$0")/.."

zips=0
args=()
for arg in "$@"; do
    case "$arg" in
        --zips) zips=1 ;;
        *) args+=("$arg") ;;
    esac
done

step() { printf '\n==> %s\n' "$*"; }

# The suites named, in one pass: the noisy, burst and lease suites alone need two binaries (and
# the emulators only with --noisy-backend aws); the lambda, cost and sizes suites, and a full
# run (no suite named), the Lambda binary as deployed (below).
named=0
light=0
heavy=0
deployed=0
for arg in "${args[@]}"; do
    case "$arg" in
        noisy | burst | lease) named=1; light=1 ;;
        observability) named=1 ;;
        api | e2e | fanout) named=1; heavy=1 ;;
        lambda | cost | sizes) named=1; heavy=1; deployed=1 ;;
    esac
done
[ "$named" = 1 ] || deployed=1
only_noisy=0
[ "$light" = 1 ] && [ "$heavy" = 0 ] && only_noisy=1
emulators=1
if [ "$only_noisy" = 1 ]; then
    emulators=0
    for arg in "${args[@]}"; do
        case "$arg" in
            *aws) emulators=1 ;;
        esac
    done
fi

# The benchmark and the server it measures. The Lambda binary it runs is the deployed build
# below, never an opt-level 3 one: building that too cost a link with LTO for nothing.
step "release build (webhooks-local, webhooks-bench)"
cargo build --release --locked -p webhooks-local -p webhooks-bench

# The Lambda binary as it is deployed: `cargo lambda build --release` (what `sam build` runs)
# gives cargo the environment of Cargo.toml's [workspace.metadata.lambda.build] and
# panic = "abort"; the no-op reference is built the same way, natively, in a target directory
# of their own (webhooks-local keeps the release profile as it is).
if [ "$deployed" = 1 ]; then
    step "the Lambda binary and the no-op as deployed (cargo lambda's settings, native)"
    lambda_target="${CARGO_TARGET_DIR:-target}/lambda-native"
    mapfile -t lambda_env < <(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
env = json.load(sys.stdin)["metadata"]["lambda"]["build"].get("env", {})
for k, v in env.items():
    print(f"{k}={v}")')
    lambda_env+=(CARGO_PROFILE_RELEASE_PANIC=abort)
    echo "${lambda_env[*]}"
    env "${lambda_env[@]}" cargo build --release --locked \
        --target-dir "$lambda_target" -p webhooks-lambda -p webhooks-bench --bin webhooks-lambda --bin noop-lambda
    args+=(--lambda-bin-dir "$lambda_target/release")
fi

if [ "$zips" = 1 ]; then
    step "arm64 Lambda zips (cargo lambda build --release --arm64 --output-format zip)"
    # cargo-lambda from the tools' venv (scripts/emulators.sh), and Rust's arm64 target.
    # shellcheck source=scripts/emulators.sh
    source scripts/emulators.sh
    install_lambda_tools
    venv_bin="$(dirname "$CARGO_LAMBDA")"
    export PATH="$venv_bin:$PATH"   # its zig: the venv's ziglang
    rustup target add aarch64-unknown-linux-gnu
    # The one binary of every function (functions/): one build, one link, one zip.
    "$CARGO_LAMBDA" lambda build --release --arm64 --output-format zip --locked --package webhooks-lambda
fi

if [ "$emulators" = 1 ]; then
    # shellcheck source=scripts/emulators.sh
    source scripts/emulators.sh
    trap stop_emulators EXIT
    step "emulators (DynamoDB Local, moto SQS)"
    start_dynamodb
    start_moto
fi

step "webhooks-bench ${args[*]:-}"
"${CARGO_TARGET_DIR:-target}/release/webhooks-bench" "${args[@]}"
