#!/usr/bin/env bash
# A fit across three sites with Flower (docs/federation.md): its own virtual environment
# with the `flower` extra, three site files, a SuperLink and three SuperNodes as separate
# processes on loopback (--insecure: loopback only), each certified method run across them
# and compared with the in-process fit (test seed), then one round too many, which every
# site must refuse. Every process it starts is stopped on exit; the whole run is under a
# time limit (FLOWER_LIMIT seconds, default 900).
#   bash .ci/flower.sh            (FLOWER_VENV=DIR reuses an environment)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
limit="${FLOWER_LIMIT:-900}"
work="$(mktemp -d)"
venv="${FLOWER_VENV:-$work/venv}"
port=$((20000 + RANDOM % 20000))           # the SuperLink's HTTP API; the SuperNodes' from port + 1
pids=()

stop() {   # each started process leads its own process group (setsid): its children go with it
  local p
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
  sleep 2
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
}
trap stop EXIT
# the time limit: this script is ended (and its trap stops the rest) past $limit seconds
setsid bash -c "sleep $limit; echo 'flower.sh: past its limit of $limit s' >&2; kill -TERM $$" &
pids+=($!)

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet -e "$root[flower]"
py="$venv/bin/python"
export PATH="$venv/bin:$PATH" FLWR_HOME="$work/flwr"
"$py" .ci/flower_check.py prepare "$work" "$port"

# A malformed site file fails before its SuperNode is started.
"$py" .ci/flower_check.py settings "$work" fedsgd
if "$py" -m fedgdp.federation check "$work/sites/bad.csv" "$work/settings.json" 2>"$work/bad.err"; then
  echo "flower.sh: the malformed file was accepted" >&2; exit 1
fi
echo "malformed site file: refused before joining ($(tail -1 "$work/bad.err"))"

cd "$work"
setsid flower-superlink --insecure --host 127.0.0.1 --port "$port" --disable-runtime-dependency-installation \
  >"$work/superlink.log" 2>&1 &
pids+=($!)
sleep 3
i=0
for site in a b c; do
  "$py" -m fedgdp.federation check "$work/sites/$site.csv" "$work/settings.json" >/dev/null
  setsid flower-supernode --insecure --superlink "127.0.0.1:$port" --port $((port + 1 + i)) \
    --node-config "data='$work/sites/$site.csv' settings='$work/settings.json' name='$site' test-seed=20261206 test-index=$i test-sites=3" \
    >"$work/supernode-$site.log" 2>&1 &
  pids+=($!)
  i=$((i + 1))
done

run() {   # METHOD OUT EXTRA: one run of the app; waits for its result file
  local method="$1" out="$2" extra="$3"
  "$py" "$root/.ci/flower_check.py" settings "$work" "$method"
  rm -f "$out"
  flwr run "$work/app" loopback --run-config \
    "settings='$(cat "$work/settings.json")' sites=3 out='$out' extra=$extra timeout=60" >"$work/run-$method.log" 2>&1
  local t=0
  until [ -s "$out" ]; do
    sleep 1; t=$((t + 1))
    if [ "$t" -ge 240 ]; then
      echo "flower.sh: no result for $method after 240 s" >&2
      tail -20 "$work/run-$method.log" "$work/superlink.log" >&2 || true
      return 1
    fi
  done
}

start=$SECONDS
status=0
for method in fedsgd fedavg fedhybrid fednewton_certified; do
  run "$method" "$work/$method.json" 0
  "$py" "$root/.ci/flower_check.py" compare "$work" "$method" || status=1
done
run fedavg "$work/extra.json" 1
"$py" "$root/.ci/flower_check.py" refusal "$work" || status=1
echo "flower.sh: five runs across three sites in $((SECONDS - start)) s, $SECONDS s in all (install included)"
exit $status
