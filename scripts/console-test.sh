#!/usr/bin/env bash
# Browser tests of the web console (local/tests/browser/console.test.mjs):
# Debian's Chromium driven by Playwright, against the release webhooks-local
# and a real callback receiver. Installs what it needs, idempotently:
#
#   - Chromium from Debian's packages (apt-get install chromium; needs root,
#     as on CI), unless /usr/bin/chromium (or $CHROMIUM) is already there;
#   - playwright-core from npm (pinned) under $WEBHOOKS_TOOLS_DIR/playwright
#     (never a browser download: it drives the Debian Chromium).
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

# shellcheck source=scripts/emulators.sh
source scripts/emulators.sh # WEBHOOKS_TOOLS_DIR, logs and helpers

fail() { printf 'console-test: %s\n' "$*" >&2; exit 1; }

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

pw_dir="$WEBHOOKS_TOOLS_DIR/playwright"
if [ "$(cat "$pw_dir/.installed" 2>/dev/null)" != "$PLAYWRIGHT_CORE_VERSION" ] ||
    [ ! -f "$pw_dir/node_modules/playwright-core/package.json" ]; then
    _emu_need node npm || fail "node and npm are needed to install playwright-core"
    mkdir -p "$pw_dir" "$_EMU_LOGS"
    log="$_EMU_LOGS/npm-playwright-core.log"
    [ -f "$pw_dir/package.json" ] || printf '{"name":"webhooks-browser-tools","private":true}\n' >"$pw_dir/package.json"
    # playwright-core downloads no browser on install; the tests use Debian's.
    if ! (cd "$pw_dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --no-save \
        --no-package-lock --loglevel=error "playwright-core@$PLAYWRIGHT_CORE_VERSION") >"$log" 2>&1; then
        _emu_show_log "$log"
        fail "npm install playwright-core@$PLAYWRIGHT_CORE_VERSION into $pw_dir failed"
    fi
    printf '%s\n' "$PLAYWRIGHT_CORE_VERSION" >"$pw_dir/.installed"
fi

bin="${WEBHOOKS_LOCAL_BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --locked -p webhooks-local # a no-op when up to date
    bin="${CARGO_TARGET_DIR:-target}/release/webhooks-local"
fi
screenshots="${SCREENSHOTS:-${CARGO_TARGET_DIR:-target}/console-screenshots}"

echo "console-test: $("$chromium" --version 2>/dev/null | head -n 1), playwright-core $PLAYWRIGHT_CORE_VERSION"
WEBHOOKS_LOCAL_BIN="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" PLAYWRIGHT_DIR="$pw_dir" \
    CHROMIUM="$chromium" SCREENSHOTS="$screenshots" \
    node --test --test-concurrency=1 --test-timeout=120000 local/tests/browser/console.test.mjs
echo "console-test: screenshots in $screenshots"
