#!/usr/bin/env bash
# The benchmarks of BENCHMARKS.md in one command: builds the release binaries, starts
# DynamoDB Local and moto's SQS (as scripts/test.sh does, under .tools/), runs
# webhooks-bench, and stops what it started. Results: bench/results/results.json,
# results.md and latency.svg. Not part of CI: it takes 10 to 20 minutes on 2 cores.
#
#   scripts/bench.sh                         # every suite
#   scripts/bench.sh --zips                  # first build the arm64 Lambda zips (cargo lambda)
#   scripts/bench.sh api e2e --duration 5s   # other arguments go to webhooks-bench
#
# webhooks-bench --help lists the suites (api, e2e, lambda, fanout, sizes, cost) and settings.
# The cost suite runs webhooks-local --backend aws behind a recording proxy (50 operations
# per phase by default: about a minute on 2 cores; --cost-operations changes it).
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

step "release build (functions, webhooks-local, webhooks-bench, noop-lambda)"
cargo build --release --locked --workspace --bins

if [ "$zips" = 1 ]; then
    step "arm64 Lambda zips (cargo lambda build --release --arm64 --output-format zip)"
    export PATH="$PWD/.tools/venv/bin:$PATH"
    if ! command -v cargo-lambda >/dev/null 2>&1; then
        echo "cargo-lambda is not installed (expected in .tools/venv/bin)" >&2
        exit 1
    fi
    packages=()
    for dir in functions/*/; do
        packages+=(--package "$(basename "$dir")")
    done
    cargo lambda build --release --arm64 --output-format zip --locked "${packages[@]}"
fi

# shellcheck source=scripts/emulators.sh
source scripts/emulators.sh
trap stop_emulators EXIT
step "emulators (DynamoDB Local, moto SQS)"
start_dynamodb
start_moto

step "webhooks-bench ${args[*]:-}"
target/release/webhooks-bench "${args[@]}"
