#!/usr/bin/env bash
# Runs the README's curl walkthrough exactly as written, the way a new user
# pastes it: blocks marked <!-- walkthrough:background --> are started in the
# background (the "other terminals"), blocks marked <!-- walkthrough --> run in
# one shell in order. Fails if any command fails or an expected output is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

for port in 3000 4000 4001; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "walkthrough: port $port is in use; the README walkthrough needs it free" >&2
    exit 1
  fi
done

python3 - "$work" <<'PY'
import re, sys, pathlib
out = pathlib.Path(sys.argv[1])
text = pathlib.Path("README.md").read_text()
blocks = re.findall(r"<!-- walkthrough(:background)? -->\s*```(?:sh|bash|console)\n(.*?)```", text, re.S)
if not blocks:
    sys.exit("walkthrough: no marked blocks in README.md")
bg = fg = 0
for background, body in blocks:
    if background:
        bg += 1
        (out / f"bg{bg}.sh").write_text(body)
    else:
        fg += 1
        (out / f"fg{fg:02}.sh").write_text(body)
print(f"walkthrough: {bg} background and {fg} foreground blocks")
PY

# A fresh data dir, as on a new machine; a developer's own is set aside and restored.
if [ -e webhooks-data ]; then mv webhooks-data "$work/webhooks-data.saved"; fi
restore() { rm -rf webhooks-data; if [ -e "$work/webhooks-data.saved" ]; then mv "$work/webhooks-data.saved" webhooks-data; fi; }
trap 'restore; cleanup' EXIT
for f in "$work"/bg*.sh; do
  setsid bash -e "$f" >"$f.log" 2>&1 &
  pids+=($!)
done

# The README tells the reader to wait until both terminals say they are listening.
wait_for_line() { # log file, pid, text
  for _ in $(seq 1 900); do
    if grep -qF "$3" "$1" 2>/dev/null; then return 0; fi
    kill -0 "$2" 2>/dev/null || break
    sleep 1
  done
  echo "walkthrough: never saw '$3' in $1:" >&2; cat "$1" >&2; exit 1
}
wait_for_line "$work/bg1.sh.log" "${pids[0]}" "webhooks-local listening on"
wait_for_line "$work/bg2.sh.log" "${pids[1]}" "receiving callbacks on"
wait_for_line "$work/bg3.sh.log" "${pids[2]}" "receiving callbacks on"

cat "$work"/fg*.sh >"$work/all.sh"
if ! (cd . && bash -euo pipefail "$work/all.sh") >"$work/out.log" 2>&1; then
  echo "walkthrough: a command failed; output:" >&2
  cat "$work/out.log" >&2
  for f in "$work"/bg*.sh.log; do echo "--- $f" >&2; cat "$f" >&2; done
  exit 1
fi
cat "$work/out.log"
for expected in '"notifications":1' '"text":"Hello!"' '"status":"ACTIVE"' '"totalElements":1' '"key":"whsec_' 'HTTP/1.1 204' '"code":"SUBSCRIPTION_NOT_FOUND"' \
  '"httpStatus":500' '"trigger":"MANUAL"' '"status":"DELIVERED"' '"buckets":'; do
  grep -qF "$expected" "$work/out.log" || { echo "walkthrough: expected output $expected not seen" >&2; exit 1; }
done
grep -q "handshake: answered validation-token" "$work/bg2.sh.log" ||
  { echo "walkthrough: the listener never answered a handshake" >&2; cat "$work/bg2.sh.log" >&2; exit 1; }
# Delivery is asynchronous: give a loaded machine some time to show the notification.
for _ in $(seq 1 30); do
  if grep -qF '"messageId":"msg-1"' "$work/bg2.sh.log"; then notified=1; break; fi
  sleep 1
done
[ "${notified:-0}" = 1 ] || { echo "walkthrough: the listener printed no notification" >&2; cat "$work/bg2.sh.log" >&2; exit 1; }
echo "walkthrough: README walkthrough passed"
