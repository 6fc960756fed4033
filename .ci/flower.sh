#!/usr/bin/env bash
# A fit across three sites with Flower, deployed as docs/federation.md says: fedgdp installed from
# this checkout in its own virtual environment; TLS (a CA and the SuperLink's certificate) and node
# authentication (each SuperNode's key registered); each site a SuperNode with --isolation process
# (Flower's, its waits shortened: python -m fedgdp.federation supernode) and its guard (python -m
# fedgdp.federation site), which holds the site's file, lifetime ledger and key; a fourth, rogue
# node registered too, claiming site a with its own key and 5,000 poisoned rows.
# Each certified method runs on fresh rows and is compared with the in-process fit (test seed); then
# a foreign app, a guard killed (SIGKILL) mid-run and restarted, a guard killed at each point of its
# taking of a message and restarted, the SuperLink killed and restarted, and a second run on the same rows.
# Every process it starts is stopped on exit; the whole run is under a time limit (FLOWER_LIMIT
# seconds, default 900).
#   bash .ci/flower.sh            (FLOWER_VENV=DIR reuses an environment)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
limit="${FLOWER_LIMIT:-900}"
work="$(mktemp -d)"
venv="${FLOWER_VENV:-$work/venv}"
port=$((20000 + RANDOM % 20000))           # the SuperLink's HTTP API; the SuperNodes' Runtime APIs from port + 1
pids=()
declare -A guard

stop() {   # each started process leads its own process group (setsid): its children go with it
  local p
  for p in "${pids[@]}" "${guard[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
  sleep 2
  for p in "${pids[@]}" "${guard[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
}
trap stop EXIT
# the time limit: this script is ended (and its trap stops the rest) past $limit seconds
setsid bash -c "sleep $limit; echo 'flower.sh: past its limit of $limit s' >&2; kill -TERM $$" &
pids+=($!)

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet -e "$root[flower]"      # from the checkout, not an index
py="$venv/bin/python"
export PATH="$venv/bin:$PATH" FLWR_HOME="$work/flwr"
# TLS and the nodes' keys, made as docs/federation.md says (steps 2 and 3)
bash "$root/.ci/flower_keys.sh" "$work"
"$py" .ci/flower_check.py prepare "$work" "$port"
check() { "$py" "$root/.ci/flower_check.py" "$@"; }

# A malformed site file fails before its SuperNode is started.
check settings "$work" fedsgd
if "$py" -m fedgdp.federation check "$work/sites/bad.csv" "$work/settings.json" 2>"$work/bad.err"; then
  echo "flower.sh: the malformed file was accepted" >&2; exit 1
fi
echo "malformed site file: refused before joining ($(tail -1 "$work/bad.err"))"

cd "$work"
start_superlink() {   # its state (the registered keys among it) in a database file, kept over a restart
  FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.1 setsid flower-superlink --host 127.0.0.1 --port "$port" \
    --ssl-ca-certfile certs/ca.crt --ssl-certfile certs/server.pem --ssl-keyfile certs/server.key \
    --enable-supernode-auth --disable-runtime-dependency-installation --database "$work/superlink.db" \
    >>"$work/superlink.log" 2>&1 &
  superlink=$!
  pids+=($!)
  disown "$!"            # no job notice when the restart check kills it
  sleep 4
}
start_superlink
start_guard() {   # NODE: the node's guard, on its SuperNode's Runtime API
  setsid "$py" -m fedgdp.federation site "$work/site-$1.toml" >>"$work/guard-$1.log" 2>&1 &
  guard[$1]=$!
  disown "$!"            # no job notice when the restart check kills it
}
check use "$work" eq-fedsgd
i=0
for node in a b c rogue; do
  flwr supernode register "keys/${node}_key.pub" loopback >/dev/null
  setsid "$py" -m fedgdp.federation supernode --poll 0.1 -- --superlink "127.0.0.1:$port" \
    --root-certificates certs/ca.crt --auth-supernode-private-key "keys/${node}_key" --isolation process \
    --port $((port + 1 + i)) \
    >"$work/supernode-$node.log" 2>&1 &
  pids+=($!)
  start_guard "$node"
  i=$((i + 1))
done

run() {   # NAME METHOD [--extra]: one run of the app by the coordinator's command; its status
  local name="$1" method="$2"
  shift 2
  check settings "$work" "$method"
  "$py" -m fedgdp.federation run "$root/apps/fedgdp-sites" loopback --settings settings.json \
    --sites sites.json --out "$work/$name.json" --timeout 30 --wait 300 "$@" >"$work/run-$name.log" 2>&1
}

start=$SECONDS
status=0
for method in fedsgd fedavg fedhybrid fednewton_certified; do
  check use "$work" "eq-$method"
  extra=()
  [ "$method" = fedavg ] && extra=(--extra)
  if ! run "$method" "$method" "${extra[@]}"; then
    echo "flower.sh: the $method run failed:" >&2; tail -5 "$work/run-$method.log" >&2; status=1; continue
  fi
  check compare "$work" "$method" || status=1
done
check unknown "$work" || status=1
check refusal "$work" || status=1
grep -h "^request " "$work"/run-*.log | awk '{s += $(NF - 1); n += 1} END {
  printf "four runs, %d requests, %.2f s per request (mean; the in-process fits above)\n", n, s / n}'

# A coordinator's own app, whose ClientApp would read the site's file: no site runs it.
flwr run "$work/rogue-app" loopback --run-config "settings='$(cat settings.json)' out='$work/foreign.json'" \
  >"$work/run-foreign.log" 2>&1
for _ in $(seq 120); do [ -s "$work/foreign.json" ] && break; sleep 1; done
check foreign "$work" || status=1

# A guard killed (SIGKILL) mid-run, after its second release is on disk, and restarted at once.
check use "$work" restart
before=$(wc -l <"$work/ledger-a/ledger.jsonl")
run restart fedavg --extra &
runner=$!
for _ in $(seq 600); do
  [ "$(wc -l <"$work/ledger-a/ledger.jsonl")" -ge $((before + 2)) ] && break
  sleep 0.1
done
kill -KILL -- "-${guard[a]}" 2>/dev/null || true
start_guard a
wait "$runner" || true
check restart "$work" || status=1

# A guard killed (SIGKILL) at each point of its taking of a message (request 2), and restarted at once by
# a loop: the run resumes, or fails naming the cause, within seconds (the guard's test-only test_kill_at).
kill -TERM -- "-${guard[a]}" 2>/dev/null || true
for point in input message header; do
  check use "$work" "kill-$point"
  cp "$work/site-a.toml" "$work/site-a-kill.toml"
  echo "test_kill_at = \"$point@3\"" >>"$work/site-a-kill.toml"
  setsid bash -c "until [ -e '$work/kill-$point.ended' ]; do '$py' -m fedgdp.federation site '$work/site-a-kill.toml' \
    >>'$work/guard-a.log' 2>&1; date +%s.%N >>'$work/kill-$point.died'; done" 2>>"$work/guard-a.log" &
  guard[a]=$!
  disown "$!"
  run "kill-$point" fedavg || true
  date +%s.%N >"$work/kill-$point.ended"
  kill -TERM -- "-${guard[a]}" 2>/dev/null || true
  check killed "$work" "$point" "$(head -1 "$work/kill-$point.died" 2>/dev/null || echo 0)" \
    "$(cat "$work/kill-$point.ended")" || status=1
done
start_guard a

# The SuperLink killed (SIGKILL) and restarted from its database: the sites' SuperNodes, left
# running, rejoin (every site answers the next run's greeting).
kill -KILL -- "-$superlink" 2>/dev/null || true
start_superlink

# A second run on the same rows (the restart check's): every site has spent its lifetime mu on them.
check use "$work" restart
# Its failure shows: the coordinator's command exits 1, and Flower lists the run as failed.
code=0
run second fedavg || code=$?
[ "$code" -ne 0 ] || { echo "flower.sh: the second run on the same rows was not refused" >&2; status=1; }
second_id=$(sed -n 's/^run \([0-9]*\) started$/\1/p' "$work/run-second.log")
flwr ls loopback --run-id "$second_id" --format json >"$work/status-second.json" 2>/dev/null || true
check second "$work" "$code" || status=1
check rejoined "$work" || status=1
echo "flower.sh: $((SECONDS - start)) s of runs, $SECONDS s in all (install included)"
exit $status
