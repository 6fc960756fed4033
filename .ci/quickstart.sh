#!/usr/bin/env bash
# CI: the README's install and smoke run from a copy of the tracked files, with a fresh virtual
# environment holding only the `pipeline` extra (no dev tools): the smoke run, the
# HTML report of it, and its outputs under the run's name (results/smoke/...).
#   bash .ci/quickstart.sh [KEEP]
# KEEP: a folder that receives the run's results/, figures/ and tables/ when it passes
# (.ci/run hands them to .ci/slurm.sh as the local run the SLURM run must equal).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
keep=${1:-}
work=$(mktemp -d /tmp/fedgdp-quickstart.XXXXXX)
trap 'rm -rf "$work"' EXIT
say() { printf '[quickstart %(%H:%M:%S)T] %s\n' -1 "$*"; }

(cd "$repo" && git ls-files -z | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$work"
cd "$work"
python3 -m venv .venv
.venv/bin/pip install --quiet -e '.[pipeline]'
t0=$SECONDS
.venv/bin/snakemake --cores 2 --configfile config/smoke.yaml --quiet
.venv/bin/snakemake --report results/smoke/report.html --configfile config/smoke.yaml
test -s results/smoke/report.html
test -s results/smoke/config.resolved.yaml
test -s figures/smoke/fig03.png && test -s tables/smoke/table1.md
test ! -e results/paper
say "smoke run and report with the pipeline extra only: $(( SECONDS - t0 ))s"
if [[ -n $keep ]]; then
    mkdir -p "$keep" && cp -a results figures tables "$keep/"
    say "kept the smoke run's results, figures and tables in $keep"
fi
