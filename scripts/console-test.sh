#!/usr/bin/env bash
# The web console's JavaScript: ESLint (shared/console-ui/eslint.config.mjs),
# then its browser tests (local/tests/browser/console.test.mjs): Debian's
# Chromium driven by Playwright, against the release webhooks-local and a
# real callback receiver. Installs what it needs, idempotently:
#
#   - eslint, @eslint/js and globals from npm (pinned) under
#     $WEBHOOKS_TOOLS_DIR/eslint;
#   - Chromium from Debian's packages (apt-get install chromium; needs root,
#     as on CI), unless /usr/bin/chromium (or $CHROMIUM) is already there;
#   - playwright-core from npm (pinned) under $WEBHOOKS_TOOLS_DIR/playwright
#     (never a browser download: it drives the Debian Chromium);
#   - moto (scripts/emulators.sh), unless AWS_ENDPOINT_URL_SQS names one already: the AWS
#     destination test's customer account.
#
# Fails, never skips, when either cannot be had. Screenshots go to
# target/console-screenshots/ (or $SCREENSHOTS).
#
# Called by scripts/test.sh; runs alone too: `scripts/console-test.sh`.
# Settings (environment, all optional):
#   WEBHOOKS_LOCAL_BIN   the binary to test (default: the release build, built first)
#   CHROMIUM             the browser (default /usr/bin/chromium)
set -euo pipefail
cd "$(dirname "$0")/.."

PLAYWRIGHT_CORE_VERSION="${PLAYWRIGHT_CORE_VERSION:-1.65.1}"
ESLINT_PACKAGES=(eslint@10.15.0 @eslint/js@10.0.1 globals@17.14.0)

# shellcheck source=scripts/emulators.sh
source scripts/emulators.sh # WEBHOOKS_TOOLS_DIR, logs and helpers

fail() { printf 'console-test: %s\n' "$*" >&2; exit 1; }

# npm_tools NAME PACKAGE@VERSION...: installs the packages under
# $WEBHOOKS_TOOLS_DIR/NAME unless exactly those are there already.
npm_tools() {
    local name="$1"
    shift
    local dir="$WEBHOOKS_TOOLS_DIR/$name" wanted="$*"
    [ "$(cat "$dir/.installed" 2>/dev/null)" = "$wanted" ] && [ -d "$dir/node_modules" ] && return 0
    _emu_need node npm || fail "node and npm are needed to install $wanted"
    mkdir -p "$dir" "$_EMU_LOGS"
    local log="$_EMU_LOGS/npm-$name.log"
    [ -f "$dir/package.json" ] || printf '{"name":"webhooks-%s-tools","private":true}\n' "$name" >"$dir/package.json"
    # playwright-core downloads no browser on install; the tests use Debian's.
    if ! (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --no-save \
        --no-package-lock --loglevel=error "$@") >"$log" 2>&1; then
        _emu_show_log "$log"
        fail "npm install $wanted into $dir failed"
    fi
    printf '%s\n' "$wanted" >"$dir/.installed"
}

if [ "${1:-}" = --install-only ]; then
    # scripts/test.sh installs the tools early, in the background, while it compiles.
    npm_tools eslint "${ESLINT_PACKAGES[@]}"
    npm_tools playwright "playwright-core@$PLAYWRIGHT_CORE_VERSION"
    exit 0
fi

# The linter first: it takes a second, the browser tests a minute.
npm_tools eslint "${ESLINT_PACKAGES[@]}"
echo "console-test: eslint $("$WEBHOOKS_TOOLS_DIR/eslint/node_modules/.bin/eslint" --version)"
WEBHOOKS_TOOLS_DIR="$WEBHOOKS_TOOLS_DIR" "$WEBHOOKS_TOOLS_DIR/eslint/node_modules/.bin/eslint" \
    --max-warnings 0 shared/console-ui || fail "ESLint found problems in shared/console-ui"

chromium="${CHROMIUM:-/usr/bin/chromium}"
if ! "$chromium" --version >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || fail "Chromium is not installed at $chromium and installing it needs root:" \
        "run 'sudo apt-get install -y chromium' (Debian's package), or set CHROMIUM to a Chromium binary"
    command -v apt-get >/dev/null || fail "Chromium is not installed at $chromium and there is no apt-get to install it"
    mkdir -p "$_EMU_LOGS"
    log="$_EMU_LOGS/apt-chromium.log"
    echo "console-test: installing Chromium (apt-get install chromium)"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$log" 2>&1; then
        _emu_show_log "$log"
        fail "apt-get install chromium failed (log: $log)"
    fi
    "$chromium" --version >/dev/null 2>&1 || fail "Chromium was installed but $chromium does not run"
fi

npm_tools playwright "playwright-core@$PLAYWRIGHT_CORE_VERSION"
pw_dir="$WEBHOOKS_TOOLS_DIR/playwright"

bin="${WEBHOOKS_LOCAL_BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --locked -p webhooks-local # a no-op when up to date
    bin="${CARGO_TARGET_DIR:-target}/release/webhooks-local"
fi
screenshots="${SCREENSHOTS:-${CARGO_TARGET_DIR:-target}/console-screenshots}"

# The AWS destination test's customer account is in moto: the one scripts/test.sh started,
# or one of our own.
if [ -z "${AWS_ENDPOINT_URL_SQS:-}" ]; then
    trap stop_emulators EXIT
    start_moto || fail "moto did not start (the AWS destination test needs it)"
fi

echo "console-test: $("$chromium" --version 2>/dev/null | head -n 1), playwright-core $PLAYWRIGHT_CORE_VERSION"
WEBHOOKS_LOCAL_BIN="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" PLAYWRIGHT_DIR="$pw_dir" \
    CHROMIUM="$chromium" SCREENSHOTS="$screenshots" \
    node --test --test-concurrency=1 --test-timeout=120000 local/tests/browser/console.test.mjs
echo "console-test: screenshots in $screenshots"
