#!/usr/bin/env bash
# The time of a fit across three sites on loopback, beside the in-process fit of the same rows, in two
# process layouts, alternated, REPEATS times each:
#   flower   the SuperNodes as Flower ships them (flower-supernode: a 3 s idle poll), the SuperLink's
#            SuperExec at its default 1 s task poll, the guards polling their Runtime API every 0.2 s
#   fedgdp   the sites' own launcher (python -m fedgdp.federation supernode --poll 0.1), the SuperLink
#            with FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.1, the guards polling every 0.1 s
# Both deployed as .ci/flower.sh deploys them (TLS, node authentication, --isolation process, the guards);
# each layout starts a fresh SuperLink, SuperNodes and guards, and its sites fresh ledgers. The method is
# fedavg with ROUNDS rounds (one request per round), with test seeds.
#   bash scripts/bench_federation.sh OUT_DIR        (ROUNDS=10 REPEATS=2; PYTHON: one with fedgdp[flower];
#                                                    LOGS=DIR keeps every process's log; LAYOUTS: the
#                                                    layouts run, in order (default "flower fedgdp"); DATABASE=1 starts
#                                                    the SuperLink with --database, as docs/federation.md does)
# Writes OUT_DIR/bench.csv (one row per run) and OUT_DIR/bench.md (the table and the machine's load).
# start-up = the coordinator's command's wall time less its rounds (flwr run, the ServerApp's start, the
# greetings, the result's write); per round = the mean of the coordinator's request lines.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "$1")"
rounds="${ROUNDS:-10}"
repeats="${REPEATS:-2}"
py="$(realpath -s "$(command -v "${PYTHON:-python}")")"
bin="$(dirname "$py")"
work="$(mktemp -d)"
mkdir -p "$out"
export PATH="$bin:$PATH" FLWR_HOME="$work/flwr"
pids=()
stop() {
  local p
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop; rm -rf "$work"' EXIT

bash "$root/.ci/flower_keys.sh" "$work"
check() { "$py" "$root/.ci/flower_check.py" "$@"; }
cpu() {   # CPU seconds of one process so far (user + system, from /proc)
  awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0
}

echo "layout,repeat,rounds,wall_s,startup_s,per_round_s,in_process_s,cpu_sites_s,idle_cpu_per_s,load_start,load_end" \
  >"$out/bench.csv"
one() {   # LAYOUT REPEAT: a fresh deployment, one fedavg run, its row of bench.csv
  local layout="$1" rep="$2" port i node load0 t0 t1 cpus
  port=$((61000 + RANDOM % 4000))             # above Linux's ephemeral ports (32768-60999)
  rm -rf "$work"/ledger-* "$work"/sites "$work"/sets "$work/flwr"
  check prepare "$work" "$port"
  check use "$work" eq-fedavg
  ROOT="$root" "$py" - "$work" "$rounds" <<'PY'
import json, os, sys
sys.path.insert(0, os.environ["ROOT"] + "/.ci")
import flower_check
s = flower_check.settings("fedavg")
s["method_settings"] = dict(s["method_settings"], R=int(sys.argv[2]))
open(f"{sys.argv[1]}/settings.json", "w").write(json.dumps(s))
PY
  local guard="poll = 0.2\nbackoff = 1.0" env=()
  [ "$layout" = fedgdp ] && guard="poll = 0.1\nbackoff = 0.05" && env=(FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.1)
  for node in a b c; do printf "$guard\n" >>"$work/site-$node.toml"; done
  cd "$work"
  env "${env[@]}" setsid flower-superlink --host 127.0.0.1 --port "$port" --ssl-ca-certfile certs/ca.crt \
    --ssl-certfile certs/server.pem --ssl-keyfile certs/server.key --enable-supernode-auth \
    --disable-runtime-dependency-installation ${DATABASE:+--database "$work/superlink-$layout-$rep.db"} \
    >"$work/superlink-$layout-$rep.log" 2>&1 &
  pids+=($!)
  sleep 4
  local sites=()
  i=0
  for node in a b c; do
    flwr supernode register "keys/${node}_key.pub" loopback >/dev/null
    local args=(--superlink "127.0.0.1:$port" --root-certificates certs/ca.crt
                --auth-supernode-private-key "keys/${node}_key" --isolation process --port $((port + 1 + i)))
    if [ "$layout" = fedgdp ]; then
      setsid "$py" -m fedgdp.federation supernode --poll 0.1 -- "${args[@]}" >"$work/sn-$node.log" 2>&1 &
    else
      setsid flower-supernode "${args[@]}" >"$work/sn-$node.log" 2>&1 &
    fi
    pids+=($!); sites+=($!)
    setsid "$py" -m fedgdp.federation site "$work/site-$node.toml" >"$work/guard-$node.log" 2>&1 &
    pids+=($!); sites+=($!)
    i=$((i + 1))
  done
  sleep 6                                      # the SuperNodes connected and idle
  local cpu0=0 idle0=0 p
  for p in "${sites[@]}"; do idle0=$(echo "$idle0 + $(cpu "$p")" | bc); done
  sleep 10                                     # idle: the sites' polls only
  for p in "${sites[@]}"; do cpu0=$(echo "$cpu0 + $(cpu "$p")" | bc); done
  load0=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  "$py" -m fedgdp.federation run "$root/apps/fedgdp-sites" loopback --settings settings.json \
    --sites sites.json --out "$work/fit.json" --timeout 60 --wait 600 >"$work/run.log" 2>&1 \
    || { echo "bench: the $layout run failed:" >&2; tail -5 "$work/run.log" >&2
         if [ -n "${LOGS:-}" ]; then mkdir -p "$LOGS/$layout-$rep" && cp "$work"/*.log "$LOGS/$layout-$rep/"; fi
         exit 1; }
  t1=$(date +%s.%N)
  cpus=0
  for p in "${sites[@]}"; do cpus=$(echo "$cpus + $(cpu "$p")" | bc); done
  cd "$root"
  ROOT="$root" "$py" - "$work" "$layout" "$rep" "$rounds" "$t0" "$t1" "$(echo "$cpus - $cpu0" | bc)" "$load0" \
    "$(cut -d' ' -f1 /proc/loadavg)" "$(echo "($cpu0 - $idle0) / 10" | bc -l)" >>"$out/bench.csv" <<'PY'
import json, re, sys, time, warnings
import numpy as np
sys.path.insert(0, __import__("os").environ["ROOT"] + "/.ci")
import flower_check
from fedgdp import FederatedGLM
work, layout, rep, rounds, t0, t1, cpus, l0, l1, idle = sys.argv[1:]
times = [float(m.group(1)) for m in re.finditer(r"^request \d+ .* in ([0-9.]+) s$", open(f"{work}/run.log").read(),
                                                  re.M)]
assert len(times) == int(rounds), (times, rounds)
wall = float(t1) - float(t0)
X, y, clients = flower_check.rows("eq-fedavg", 1 + flower_check.SETS.index("eq-fedavg"))
s = json.load(open(f"{work}/settings.json"))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    est = FederatedGLM(**{k: v for k, v in s.items() if k not in ("features", "target")}, shuffle=False,
                       inference_share=0.0, random_state=flower_check.SEED).fit(X, y, clients)
    took = time.perf_counter() - start
theta = np.asarray(json.load(open(f"{work}/fit.json"))["theta"])
assert np.max(np.abs(theta - est.theta_)) <= 1e-12, "the run across sites differs from the in-process fit"
print(f"{layout},{rep},{rounds},{wall:.2f},{wall - sum(times):.2f},{np.mean(times):.3f},{took:.3f},{cpus},"
      f"{float(idle):.3f},{l0},{l1}")
PY
  stop
  if [ -n "${LOGS:-}" ]; then mkdir -p "$LOGS/$layout-$rep" && cp "$work"/*.log "$LOGS/$layout-$rep/"; fi
  tail -1 "$out/bench.csv"
}
for rep in $(seq "$repeats"); do
  for layout in ${LAYOUTS:-flower fedgdp}; do one "$layout" "$rep"; done
done
DATABASE="${DATABASE:-}" "$py" - "$out" "$(git -C "$root" rev-parse --short HEAD)" <<'PY'
import os
import sys
import pandas as pd
out, commit = sys.argv[1:]
t = pd.read_csv(f"{out}/bench.csv")
lines = [f"# A fit across three sites on loopback (scripts/bench_federation.sh, commit {commit})", "",
         "fedavg, one request per round, three sites with TLS and node authentication, each a SuperNode "
         "(--isolation process) and its guard; 2 cores shared with other work. start-up: the coordinator's "
         "command's wall time less its rounds. sites' CPU: the three SuperNodes' and guards' CPU seconds over the "
         "run; idle: their CPU seconds per second over 10 s with no run (their polls). The SuperLink "
         + ("with --database (DATABASE=1)." if os.environ.get("DATABASE") else "without --database (in memory)."),
         "", "| layout | repeat | rounds | wall s | start-up s | per round s | in-process fit s | sites' CPU s "
         "| idle CPU s/s | load (1 min) at start; at end |", "|---|---|---|---|---|---|---|---|---|---|"]
for r in t.itertuples():
    lines.append(f"| {r.layout} | {r.repeat} | {r.rounds} | {r.wall_s:.2f} | {r.startup_s:.2f} | "
                 f"{r.per_round_s:.3f} | {r.in_process_s:.3f} | {r.cpu_sites_s:.2f} | {r.idle_cpu_per_s:.3f} | "
                 f"{r.load_start}; {r.load_end} |")
m = t.groupby("layout")[["startup_s", "per_round_s", "in_process_s"]].mean()
lines += ["", "Means: " + "; ".join(f"{k}: start-up {v.startup_s:.2f} s, {v.per_round_s:.3f} s per round "
                                     f"(in-process fit {v.in_process_s:.3f} s)" for k, v in m.iterrows())]
if {"flower", "fedgdp"} <= set(m.index):
    lines.append(f"Per round, flower / fedgdp = {m.per_round_s['flower'] / m.per_round_s['fedgdp']:.1f}.")
open(f"{out}/bench.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
