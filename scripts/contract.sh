#!/usr/bin/env bash
# Contract check of the public API against openapi.yaml:
#
#   1. lints openapi.yaml (openapi-spec-validator, offline);
#   2. starts webhooks-local on a free loopback port with a temporary data dir and known
#      credentials, inside a network namespace of its own that has only a loopback
#      interface: generated callback URIs make the service try handshakes to arbitrary
#      hosts, and none of that traffic may leave the machine;
#   3. runs schemathesis against it with valid credentials, a bounded number of examples
#      per operation and every check (no 5xx, status codes, content types, headers and
#      bodies conform to openapi.yaml, invalid input is rejected, auth is enforced, every
#      undeclared method answers 405); any failure fails this script.
#
# Called by scripts/test.sh; runs alone too: `scripts/contract.sh`.
# Settings (environment, all optional):
#   CONTRACT_MAX_EXAMPLES   examples per operation and phase (default 100)
#   CONTRACT_SEED           schemathesis seed (default: a fixed one, so CI runs are repeatable;
#                           set CONTRACT_SEED=random for a fresh one)
#   WEBHOOKS_LOCAL_BIN      the binary to test (default: target/release/webhooks-local,
#                           built first)
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_PIP_SPECS="${SCHEMATHESIS_PIP_SPECS:-schemathesis==4.32.5 openapi-spec-validator==0.9.0}"

if [ "${_CONTRACT_IN_NETNS:-0}" != 1 ]; then
    # Outside the namespace: install what is needed (this needs the registries), then
    # re-run this script inside a fresh network namespace.
    # shellcheck source=scripts/emulators.sh
    source scripts/emulators.sh
    # shellcheck disable=SC2086
    _emu_pip_install contract $SCHEMATHESIS_PIP_SPECS
    echo "contract: lint openapi.yaml"
    "$_EMU_VENV/bin/openapi-spec-validator" openapi.yaml
    bin="${WEBHOOKS_LOCAL_BIN:-}"
    if [ -z "$bin" ]; then
        cargo build --release --locked -p webhooks-local # a no-op when up to date
        bin=target/release/webhooks-local
    fi
    if ! unshare --net true 2>/dev/null; then
        echo "contract: cannot create a network namespace (unshare --net); refusing to fuzz" \
            "a server that would make handshakes to generated addresses" >&2
        exit 1
    fi
    exec unshare --net env _CONTRACT_IN_NETNS=1 _CONTRACT_VENV="$_EMU_VENV" \
        WEBHOOKS_LOCAL_BIN="$bin" bash "$0" "$@"
fi

# Inside the namespace: only loopback exists.
ip link set lo up
venv="$_CONTRACT_VENV"
bin="$WEBHOOKS_LOCAL_BIN"
work=$(mktemp -d)
server_pid=""
listen_pid=""
cleanup() {
    local pid
    for pid in "$server_pid" "$listen_pid"; do
        [ -n "$pid" ] || continue
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

api_key="contract-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
jwt_secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export WEBHOOKS_API_KEYS="$api_key" WEBHOOKS_JWT_HS256_SECRET="$jwt_secret"
export WEBHOOKS_HANDSHAKE_TIMEOUT_MS=500 WEBHOOKS_DELIVERY_TIMEOUT_MS=500
export WEBHOOKS_RETRY_SCHEDULE=100ms RUST_LOG="${RUST_LOG:-warn}"
unset WEBHOOKS_JWT_JWKS_URL WEBHOOKS_JWT_ISSUER WEBHOOKS_JWT_AUDIENCE WEBHOOKS_JWT_ORG_CLAIM

"$bin" serve --addr 127.0.0.1:0 --data-dir "$work/data" >"$work/banner" 2>"$work/server.log" &
server_pid=$!
base=""
for _ in $(seq 100); do
    base=$(sed -n 's/^webhooks-local listening on //p' "$work/banner")
    [ -n "$base" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$base" ] || { echo "contract: webhooks-local did not start" >&2; cat "$work/server.log" >&2; exit 1; }
# The receiver of the document's `local` example, so that example's create succeeds and the
# stateful phase gets real subscription ids to follow.
"$bin" listen --port 4000 >"$work/listen.out" 2>"$work/listen.log" &
listen_pid=$!
token=$("$bin" token --org org-1 --ttl 1h --data-dir "$work/data")

seed="${CONTRACT_SEED:-20261122}"
seed_args=(--seed "$seed")
[ "$seed" = random ] && seed_args=()
echo "contract: schemathesis against $base (${CONTRACT_MAX_EXAMPLES:-100} examples per operation)"
rc=0
(cd "$work" && "$venv/bin/st" --config-file "$OLDPWD/scripts/contract.toml" \
    run "$OLDPWD/openapi.yaml" \
    --url "$base" \
    -H "x-api-key: $api_key" -H "Authorization: Bearer $token" \
    --max-examples "${CONTRACT_MAX_EXAMPLES:-100}" \
    "${seed_args[@]}" \
    --workers 2 \
    --request-timeout 10 \
    --suppress-health-check too_slow,filter_too_much \
    --no-color) || rc=$?
if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "contract: webhooks-local died during the run" >&2
    rc=1
fi
if grep -qiE 'panicked|stack backtrace' "$work/server.log"; then
    echo "contract: webhooks-local panicked:" >&2
    grep -iE -A5 'panicked' "$work/server.log" >&2 || true
    rc=1
fi
if [ "$rc" != 0 ]; then
    echo "contract: FAILED (schemathesis exit $rc); server log tail:" >&2
    tail -n 40 "$work/server.log" >&2
    exit "$rc"
fi
echo "contract: every response conforms to openapi.yaml"
