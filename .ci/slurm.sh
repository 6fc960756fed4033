#!/usr/bin/env bash
# CI: the SLURM profile against a real single-node SLURM (Debian's slurm-wlm + munge).
#   bash .ci/slurm.sh [PYTHON [LOCAL]]
# PYTHON: the interpreter of an environment with fedgdp installed (default: python3).
# LOCAL: the results/, figures/ and tables/ of a `--cores 2` run of config/smoke.yaml from
# this tree (.ci/run passes the Quick start's, `.ci/quickstart.sh KEEP`); without it the
# script makes that local run itself.
# Needs root on Debian/Ubuntu (apt-get, daemons, /etc/slurm/slurm.conf). Steps:
#  1. install the `slurm` extra of pyproject.toml (snakemake-executor-plugin-slurm),
#     and slurm-wlm + munge when missing;
#  2. bring up munged, slurmctld and slurmd (.ci/slurm-cluster.sh);
#  3. run config/smoke.yaml through `--profile workflow/profiles/slurm` in a copy of the
#     working tree (and `--cores 2` locally in another, unless LOCAL is given);
#  4. check that every cell file was written inside a job submitted with sbatch
#     (slurm_job_id in its Parquet metadata) and that the summaries and tables equal
#     those of the local run (.ci/slurm_check.py);
#  5. submit one CNN job (digits) that asks for a GPU (nn.gpus: 1) and check that it
#     reached sbatch as --gpus=1 and ran on the node's fake GPU (.ci/slurm-cluster.sh);
#  6. run tests/workflow/test_slurm_profile.py (the plan for the paper's grid: submissions);
#  7. tear everything down (trap), whatever happened.
# FEDGDP_SLURM_TIMEOUT (seconds, default 900) bounds the SLURM run;
# SLURM_CI_KEEP=1 keeps the work folder and SLURM's logs for a look afterwards.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-${PYTHON:-python3}}
[[ $py == */* ]] && py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"   # the runs cd elsewhere
local_run=${2:-}
timeout_s=${FEDGDP_SLURM_TIMEOUT:-900}
say() { printf '[slurm-ci %(%H:%M:%S)T] %s\n' -1 "$*"; }
if [[ $(id -u) -ne 0 ]]; then
    say "SLURM check skipped: it needs root (packages, daemons, /etc/slurm)"; exit 0
fi

# shellcheck source=.ci/slurm-cluster.sh
source "$repo/.ci/slurm-cluster.sh"
work=$(mktemp -d /tmp/fedgdp-slurm-ci.XXXXXX)
cleanup() {
    local rc=$?
    slurm_down || true
    if [[ ${SLURM_CI_KEEP:-0} == 1 ]]; then say "kept $work"; else rm -rf "$work"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "== SLURM: profile workflow/profiles/slurm against a single-node cluster"
mapfile -t extra < <("$py" - "$repo/pyproject.toml" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["slurm"]))
EOF
)
"$py" -m pip install --quiet "${extra[@]}"
say "installed: $("$py" -m pip list 2>/dev/null | awk '/^snakemake(-executor-plugin-slurm)? /{printf "%s %s  ", $1, $2}')"
slurm_install

t0=$SECONDS
slurm_up
t_up=$(( SECONDS - t0 ))
say "bring-up: ${t_up}s"

# Copies of the working tree's tracked files: the runs never touch the checkout.
dirs=(slurm)
[[ -z $local_run ]] && dirs+=(local)
for d in "${dirs[@]}"; do
    mkdir -p "$work/$d"
    (cd "$repo" && git ls-files -z | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$work/$d"
done
smk=("$py" -m snakemake --configfile config/smoke.yaml --nocolor)

t0=$SECONDS
if [[ -n $local_run ]]; then
    [[ -d $local_run/results ]] || { say "LOCAL $local_run has no results/"; exit 1; }
    ln -s "$(cd "$local_run" && pwd)" "$work/local"
    say "local run: the one in $local_run"
else
    (cd "$work/local" && "${smk[@]}" --cores 2 >"$work/local.log" 2>&1) || {
        tail -n 40 "$work/local.log"; say "local run failed"; exit 1; }
    say "local run (--cores 2): $(( SECONDS - t0 ))s, $(grep -Eo '[0-9]+ of [0-9]+ steps \(100%\) done' "$work/local.log" | tail -n1)"
fi
t_local=$(( SECONDS - t0 ))

# The profile as a user runs it, plus: no account (this cluster has no accounting
# database) and a shorter first status check (faster; MinJobAge allows it).
t0=$SECONDS
rc=0
(cd "$work/slurm" && timeout -s INT "$timeout_s" "${smk[@]}" --profile workflow/profiles/slurm \
    --slurm-no-account --slurm-init-seconds-before-status-checks 10 \
    >"$work/slurm.log" 2>&1) || rc=$?
t_slurm=$(( SECONDS - t0 ))
if (( rc != 0 )); then
    tail -n 60 "$work/slurm.log"
    (( rc == 124 )) && say "the SLURM run timed out after ${timeout_s}s"
    squeue --states=all 2>/dev/null || true
    say "SLURM run failed (exit $rc)"; exit 1
fi
say "SLURM run (--profile workflow/profiles/slurm): ${t_slurm}s, $(grep -Eo '[0-9]+ of [0-9]+ steps \(100%\) done' "$work/slurm.log" | tail -n1)"
squeue --states=all --noheader --sort=i --format='%i|%T|%C|%m|%l|%M|%k' >"$work/squeue.txt"

"$py" "$repo/.ci/slurm_check.py" "$work/local" "$work/slurm" "$work/slurm.log" "$work/squeue.txt"

# A CNN job on the node's fake GPU: the run asks for a GPU (nn.gpus: 1, as nn.device: cuda
# would), so train_nn must reach sbatch as --gpus=1, be scheduled on the GPU and run
# there (on the CPU: the GPU is fake, and nn.device auto finds no CUDA).
cnn=results/smoke/nn/digits/fig09/m~10/n~30/rep~0.parquet
t0=$SECONDS
rc=0
(cd "$work/slurm" && timeout -s INT 600 "${smk[@]}" "$cnn" --profile workflow/profiles/slurm \
    --slurm-no-account --slurm-init-seconds-before-status-checks 10 \
    --config run=smoke 'nn={gpus: 1}' >"$work/slurm-gpu.log" 2>&1) || rc=$?
t_gpu=$(( SECONDS - t0 ))
if (( rc != 0 )); then
    tail -n 60 "$work/slurm-gpu.log"; squeue --states=all 2>/dev/null || true
    say "SLURM GPU run failed (exit $rc)"; exit 1
fi
job=$("$py" -c 'import sys, pyarrow.parquet as pq; print(pq.read_schema(sys.argv[1]).metadata[b"slurm_job_id"].decode())' \
    "$work/slurm/$cnn")
asked=$(squeue --states=all --noheader -j "$job" -O tres-per-job | tr -d ' ')
device=$("$py" -c 'import sys, pandas as pd; print(",".join(sorted(set(pd.read_parquet(sys.argv[1]).device))))' \
    "$work/slurm/$cnn")
say "CNN job $job asked for ${asked:-nothing}, ran on $device: ${t_gpu}s"
[[ $asked == gres:gpu:1 ]] || { say "the CNN job did not ask for the GPU (tres-per-job: ${asked:-none})"; exit 1; }

# The profile's plan for the paper's grid (submissions <= ~60) and its settings.
(cd "$repo" && "$py" -m pytest -q -p no:cacheprovider -s tests/workflow/test_slurm_profile.py)
say "times: bring-up ${t_up}s, local run ${t_local}s, SLURM run ${t_slurm}s, CNN job on the fake GPU ${t_gpu}s"
