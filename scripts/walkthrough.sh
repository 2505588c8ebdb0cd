#!/usr/bin/env bash
# Runs the README's quick start, then docs/walkthrough.md, exactly as written, the way a new
# user pastes them, each on a fresh data dir:
#
#   1. README.md, one terminal: the block marked <!-- quickstart:background --> starts the
#      service and a receiver with `&`; once the service prints its console link (which must
#      serve the console), the blocks marked <!-- quickstart --> run in one shell, in order.
#      The event's notification must reach the receiver and show DELIVERED in the history.
#   2. docs/walkthrough.md, four terminals: blocks marked <!-- walkthrough:background -->
#      are started in the background (the "other terminals"), blocks marked
#      <!-- walkthrough --> run in one shell, in order.
#
# Fails if any command fails or an expected output is missing.
# Settings (environment, optional):
#   WEBHOOKS_LOCAL_BIN  a prebuilt webhooks-local that stands in for the documents'
#                       `cargo run --release -p webhooks-local` (default: cargo builds and
#                       runs the project's own, as the reader does)
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
groups=()
stop_groups() {
  for p in "${groups[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  groups=()
}
cleanup() { stop_groups; rm -rf "$work"; }
trap cleanup EXIT

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in 3000 4000 4001; do
  if port_in_use "$port"; then
    echo "walkthrough: port $port is in use; the quick start and the walkthrough need it free" >&2
    exit 1
  fi
done

if [ -n "${WEBHOOKS_LOCAL_BIN:-}" ]; then
  bin="$(cd "$(dirname "$WEBHOOKS_LOCAL_BIN")" && pwd)/$(basename "$WEBHOOKS_LOCAL_BIN")"
  mkdir "$work/bin"
  cat >"$work/bin/cargo" <<EOF
#!/usr/bin/env bash
# cargo run [-q] --release -p webhooks-local [-- ARGS]  →  $bin ARGS
if [ "\$1" = run ]; then
  shift
  while [ \$# -gt 0 ]; do
    case "\$1" in -q | --release) shift ;; -p) shift 2 ;; --) shift; break ;; *) break ;; esac
  done
  exec "$bin" "\$@"
fi
exec "$(command -v cargo)" "\$@"
EOF
  chmod +x "$work/bin/cargo"
  export PATH="$work/bin:$PATH"
fi

# The marked blocks of a document: background ones to $out/<prefix>bgN.sh, the others to
# $out/<prefix>fgNN.sh.
extract() { # document marker prefix
  python3 - "$1" "$2" "$work/$3" <<'PY'
import re, sys, pathlib
doc, marker, out = sys.argv[1], sys.argv[2], sys.argv[3]
text = pathlib.Path(doc).read_text()
blocks = re.findall(rf"<!-- {marker}(:background)? -->\s*```(?:sh|bash|console)\n(.*?)```", text, re.S)
if not blocks:
    sys.exit(f"walkthrough: no blocks marked {marker} in {doc}")
bg = fg = 0
for background, body in blocks:
    if background:
        bg += 1
        pathlib.Path(f"{out}bg{bg}.sh").write_text(body)
    else:
        fg += 1
        pathlib.Path(f"{out}fg{fg:02}.sh").write_text(body)
print(f"walkthrough: {doc}: {bg} background and {fg} foreground blocks")
PY
}
extract README.md quickstart qs-
extract docs/walkthrough.md walkthrough wt-

# A fresh data dir, as on a new machine; a developer's own is set aside and restored.
if [ -e webhooks-data ]; then mv webhooks-data "$work/webhooks-data.saved"; fi
restore() { rm -rf webhooks-data; if [ -e "$work/webhooks-data.saved" ]; then mv "$work/webhooks-data.saved" webhooks-data; fi; }
trap 'restore; cleanup' EXIT

# Starts a background block in a process group of its own (what it starts with `&` stays in it).
start_background() { # script
  setsid bash -e "$1" >"$1.log" 2>&1 &
  groups+=($!)
}
# The documents tell the reader to wait until the service and the receivers say they listen.
wait_for_line() { # log file, text
  for _ in $(seq 1 900); do
    if grep -qF "$2" "$1" 2>/dev/null; then return 0; fi
    sleep 1
  done
  echo "walkthrough: never saw '$2' in $1:" >&2; cat "$1" >&2; exit 1
}
run_foreground() { # name, scripts...
  local name=$1; shift
  cat "$@" >"$work/$name.sh"
  if ! bash -euo pipefail "$work/$name.sh" >"$work/$name.out" 2>&1; then
    echo "walkthrough: a command of $name failed; output:" >&2
    cat "$work/$name.out" >&2
    for f in "$work"/*bg*.sh.log; do echo "--- $f" >&2; cat "$f" >&2; done
    exit 1
  fi
  cat "$work/$name.out"
}
expect() { # output file, expected strings...
  local out=$1; shift
  for expected in "$@"; do
    grep -qF "$expected" "$out" || { echo "walkthrough: expected output $expected not seen in $out" >&2; exit 1; }
  done
}
# Delivery is asynchronous: wait (bounded) for the receiver to print the notification.
wait_for_notification() { # receiver log, text
  for _ in $(seq 1 60); do
    grep -qF "$2" "$1" && return 0
    sleep 0.5
  done
  echo "walkthrough: the receiver printed no notification with $2:" >&2; cat "$1" >&2; exit 1
}

# --- 1. The README's quick start, in one terminal -------------------------------------
rm -rf webhooks-data
start_background "$work/qs-bg1.sh"
wait_for_line "$work/qs-bg1.sh.log" "receiving callbacks on"
wait_for_line "$work/qs-bg1.sh.log" "Console (signed in):"
link=$(sed -n 's/^Console (signed in): *//p' "$work/qs-bg1.sh.log")
case "$link" in
  http://127.0.0.1:3000/prod/console#key=*'&token='*) ;;
  *) echo "walkthrough: the console link is not a signed-in link: $link" >&2; exit 1 ;;
esac
curl -sS --fail "${link%%#*}" | grep -qi '<!doctype html' ||
  { echo "walkthrough: the console link does not serve the console" >&2; exit 1; }
# The reader looks at the history after the receiver has printed the notification; the
# history's record of it follows the receiver's answer, so its block runs until DELIVERED.
qs=("$work"/qs-fg*.sh)
last=${qs[${#qs[@]}-1]}
{
  cat "${qs[@]:0:${#qs[@]}-1}"
  echo 'for _ in $(seq 1 60); do'
  echo '{'
  cat "$last"
  echo "} >$work/qs-history.out"
  echo "grep -qF '\"status\":\"DELIVERED\"' $work/qs-history.out && break"
  echo 'sleep 0.5'
  echo 'done'
  echo "cat $work/qs-history.out"
} >"$work/qs-all.sh"
run_foreground quickstart "$work/qs-all.sh"
expect "$work/quickstart.out" '"status":"ACTIVE"' '"notifications":1' '"status":"DELIVERED"' '"attempts":1'
wait_for_notification "$work/qs-bg1.sh.log" '"messageId":"msg-1"'
grep -q "handshake: answered validation-token" "$work/qs-bg1.sh.log" ||
  { echo "walkthrough: the quick start's receiver never answered a handshake" >&2; exit 1; }
echo "walkthrough: README quick start passed"
stop_groups
for _ in $(seq 1 60); do
  port_in_use 3000 || port_in_use 4000 || break
  sleep 0.5
done

# --- 2. docs/walkthrough.md, in four terminals -----------------------------------------
rm -rf webhooks-data
for f in "$work"/wt-bg*.sh; do start_background "$f"; done
wait_for_line "$work/wt-bg1.sh.log" "webhooks-local listening on"
wait_for_line "$work/wt-bg2.sh.log" "receiving callbacks on"
wait_for_line "$work/wt-bg3.sh.log" "receiving callbacks on"
run_foreground walkthrough "$work"/wt-fg*.sh
expect "$work/walkthrough.out" '"notifications":1' '"text":"Hello!"' '"status":"ACTIVE"' '"totalElements":1' \
  '"key":"whsec_' 'HTTP/1.1 204' '"code":"SUBSCRIPTION_NOT_FOUND"' \
  '"httpStatus":500' '"trigger":"MANUAL"' '"status":"DELIVERED"' '"buckets":'
grep -q "handshake: answered validation-token" "$work/wt-bg2.sh.log" ||
  { echo "walkthrough: the listener never answered a handshake" >&2; cat "$work/wt-bg2.sh.log" >&2; exit 1; }
wait_for_notification "$work/wt-bg2.sh.log" '"messageId":"msg-1"'
echo "walkthrough: docs/walkthrough.md passed"
