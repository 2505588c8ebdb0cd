#!/usr/bin/env bash
# A real Prometheus (Debian's `prometheus` package, installed with apt-get when missing)
# scrapes webhooks-local's GET /metrics (WEBHOOKS_METRICS_ADDR) during a short delivery run:
# one subscription, EVENTS events, each delivered to a `webhooks-local listen` receiver. Then
# PromQL through Prometheus's HTTP API must count exactly EVENTS delivered attempts, and the
# other families must be there. Everything runs on 127.0.0.1 and is stopped at the end.
#
#   scripts/prometheus-test.sh            (builds webhooks-local in the dev profile)
#
# Settings: EVENTS (default 20), WEBHOOKS_LOCAL_BIN (a prebuilt binary; scripts/test.sh
# passes the one its tests built), CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS="${EVENTS:-20}"
fail() { printf 'prometheus-test: FAILED: %s\n' "$*" >&2; exit 1; }
info() { printf 'prometheus-test: %s\n' "$*"; }

if ! command -v prometheus >/dev/null 2>&1; then
  info "installing Debian's prometheus package (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y --no-install-recommends prometheus >/tmp/prometheus-apt.log 2>&1 ||
    { apt-get update >>/tmp/prometheus-apt.log 2>&1 &&
      apt-get install -y --no-install-recommends prometheus >>/tmp/prometheus-apt.log 2>&1; }; } ||
    { cat /tmp/prometheus-apt.log >&2; fail "cannot install Debian's prometheus package"; }
fi
info "$(prometheus --version 2>&1 | head -1)"

bin="${WEBHOOKS_LOCAL_BIN:-}"
if [ -z "$bin" ]; then
  # The default members' features, as `cargo test` builds them: nothing is rebuilt.
  cargo build -q --locked --bin webhooks-local
  bin="${CARGO_TARGET_DIR:-target}/debug/webhooks-local"
fi
[ -x "$bin" ] || fail "no webhooks-local binary at $bin"

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts NAME on ports picked free (pick_NAME, in this shell), and again on new ones if it lost
# the race for one: between the pick and the bind, any outbound connection may take the port.
launch() { # name
  local name=$1 log="$work/$1.log" ready attempt
  for attempt in 1 2 3; do
    "pick_$name"
    ready=$("ready_$name")
    "start_$name" >"$log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 120); do
      grep -qF "$ready" "$log" 2>/dev/null && return 0
      kill -0 "${pids[-1]}" 2>/dev/null || break
      sleep 0.5
    done
    kill "${pids[-1]}" 2>/dev/null || true
    wait "${pids[-1]}" 2>/dev/null || true
    { grep -qi 'address already in use' "$log" && [ "$attempt" -lt 3 ]; } || break
    info "$name lost a port race; again on other ports"
  done
  cat "$log" >&2
  fail "never saw '$ready' in $log"
}

pick_server() { api_port=$(free_port); metrics_port=$(free_port); }
ready_server() { echo "Metrics (Prometheus):     http://127.0.0.1:$metrics_port/metrics"; }
start_server() {
  WEBHOOKS_ADDR="127.0.0.1:$api_port" WEBHOOKS_DATA_DIR="$work/data" \
    WEBHOOKS_METRICS_ADDR="127.0.0.1:$metrics_port" exec "$bin"
}
pick_listen() { hook_port=$(free_port); }
ready_listen() { echo "receiving callbacks on"; }
start_listen() { exec "$bin" listen --port "$hook_port"; }
pick_prometheus() { prom_port=$(free_port); }
ready_prometheus() { echo "Server is ready to receive web requests"; }
start_prometheus() {
  cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: webhooks
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
YAML
  exec prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port"
}

launch server
launch listen
launch prometheus

API="http://127.0.0.1:$api_port/prod"
KEY=$(cat "$work/data/api-key")
TOKEN=$(WEBHOOKS_DATA_DIR="$work/data" "$bin" token --org org-1)
AUTH=(-H "x-api-key: $KEY" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json')
curl -sS --fail-with-body -X POST "$API/webhooksubscription" "${AUTH[@]}" \
  -d "{\"uri\": \"http://127.0.0.1:$hook_port/hook\", \"eventFilters\": [\"/orgId/org-1/department/dep-1/contact\"]}" \
  >"$work/subscription.json" || fail "cannot create the subscription: $(cat "$work/subscription.json")"
for i in $(seq 1 "$EVENTS"); do
  curl -sS --fail-with-body -o /dev/null -X POST "$API/events" "${AUTH[@]}" \
    -d "{\"eventId\": \"evt-$i\", \"type\": \"contact.created\", \"organizationId\": \"org-1\",
         \"departmentId\": \"dep-1\", \"contact\": {\"id\": \"contact-$i\"}}" || fail "event $i was refused"
done
info "$EVENTS events sent"

# PromQL through Prometheus's HTTP API: the value of a one-element instant vector.
promql() {
  curl -sS --fail -G "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")'
}
query='sum(webhooks_delivery_attempts_total{job="webhooks",outcome="delivered"})'
got=none
for _ in $(seq 1 60); do
  got=$(promql "$query" || echo error)
  [ "$got" = "$EVENTS" ] && break
  sleep 1
done
[ "$got" = "$EVENTS" ] || {
  tail -20 "$work/server.log" >&2
  fail "PromQL $query answered '$got', expected $EVENTS delivered attempts"
}
info "PromQL $query = $got"

# The other families, as Prometheus stored them.
check() { # query, expected value ("" = any value)
  local v
  v=$(promql "$1")
  [ "$v" != none ] || fail "PromQL $1 found no series"
  [ -z "$2" ] || [ "$v" = "$2" ] || fail "PromQL $1 answered $v, expected $2"
  info "PromQL $1 = $v"
}
check 'up{job="webhooks"}' 1
check 'sum(webhooks_events_ingested_total)' "$EVENTS"
check 'sum(webhooks_notifications_created_total)' "$EVENTS"
check 'sum(webhooks_http_requests_total{route="ingest_event",status="202"})' "$EVENTS"
check 'sum(webhooks_http_requests_total{route="create_subscription",status="200"})' 1
check 'sum(webhooks_delivery_lag_seconds_count)' "$EVENTS"
check 'sum(webhooks_delivery_attempt_duration_seconds_count)' "$EVENTS"
check 'histogram_quantile(0.99, sum by (le) (webhooks_http_request_duration_seconds_bucket{route="ingest_event"}))' ""
check 'webhooks_queue_due_jobs' ""
check 'webhooks_queue_oldest_due_age_seconds' ""
check 'webhooks_circuit_breakers_open' 0
echo "prometheus-test: passed"
