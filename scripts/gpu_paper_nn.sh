#!/usr/bin/env bash
# The MNIST panels of Figures 9 and 10 at the paper's layout on one GPU, through the
# `fedgdp nn-*` commands the workflow's rules call (train_nn, summarise_nn, plot_nn),
# on a machine with only this working tree, PyTorch and the scientific stack (no
# Snakemake, no network):
#
#   scripts/gpu_paper_nn.sh OUT               # the grid of Figures 9-10 (WHAT=grid, the default)
#   WHAT=readings scripts/gpu_paper_nn.sh OUT  # the CNN readings map's missing pieces instead
#
# It installs the package without its dependencies (no build isolation: nothing is
# downloaded), reads MNIST from data/mnist (git-ignored: the four IDX .gz files, carried
# with the tree), records the machine (nvidia-smi, torch, CUDA, the commit), times one
# client-step (`fedgdp nn-bench`), then trains the grid run index by run index (every
# point's run 0, then every point's run 1, ...) until the runs per point are done or the
# time budget is spent, so that a short budget still gives one run of every point. Then
# it summarises and draws both figures. Everything goes to OUT: runs/*.parquet (one per
# point and run, with its per-method elapsed_s), summary/*.parquet and .csv, fig09/fig10
# .pdf/.png, timings.tsv (wall seconds per command), bench.json and provenance.txt.
#
# WHAT=readings runs `fedgdp nn-readings READINGS --run` (config/nn-readings.yaml) into
# OUT/readings/runs, where the committed pieces (docs/results/nn-readings/runs) are linked
# first so that only the missing ones run (links do not travel back), in the map's order
# (run 0 of every point, then run 1, ...), starting none after BUDGET_S; then its table
# and figure in OUT/readings. Copy OUT/readings/runs/*/*.parquet into the committed folder.
#
# Settings (environment variables; defaults: the paper's grid, docs/methods.md §6):
#   WHAT=grid                        grid | readings
#   READINGS=config/nn-readings.yaml the readings config (WHAT=readings)
#   COMMITTED=docs/results/nn-readings/runs  its committed pieces, linked first ("": none)
#   N9="50 75 100 200 300 400 600"   Figure 9's images per client (m = M9 = 100)
#   M10="100 200 300 500 800 1000"   Figure 10's numbers of clients (the full training split)
#   RUNS9=5 RUNS10=4                 runs per point (the paper's)
#   BUDGET_S=480                     no run is started after this many seconds
#   DEVICE=auto                      auto | cuda | cpu
#   EXTRA=""                         extra nn-run flags, e.g. "--rounds 2 --local-epochs 1"
#   THREADS=""                       torch CPU threads (CPU only)
# A CPU dry run at tiny scale (what was run before the GPU got this script):
#   N9="50 100" M10="1000" RUNS9=1 RUNS10=1 DEVICE=cpu EXTRA="--rounds 2 --local-epochs 1 --newton-cycles 2" \
#     scripts/gpu_paper_nn.sh /tmp/gpu-dry
#   WHAT=readings READINGS=tests/data/nn-readings-tiny.yaml COMMITTED= DEVICE=cpu BUDGET_S=60 \
#     scripts/gpu_paper_nn.sh /tmp/gpu-dry-r
set -euo pipefail
OUT=${1:?usage: scripts/gpu_paper_nn.sh OUT}
cd "$(dirname "$0")/.."
WHAT=${WHAT:-grid}
READINGS=${READINGS:-config/nn-readings.yaml}
COMMITTED=${COMMITTED-docs/results/nn-readings/runs}
case "$WHAT" in grid|readings) ;; *) echo "WHAT=$WHAT: grid or readings" >&2; exit 2 ;; esac
N9=${N9:-"50 75 100 200 300 400 600"}
M10=${M10:-"100 200 300 500 800 1000"}
M9=${M9:-100}
RUNS9=${RUNS9:-5}
RUNS10=${RUNS10:-4}
BUDGET_S=${BUDGET_S:-480}
DEVICE=${DEVICE:-auto}
EXTRA=${EXTRA:-}
THREADS=${THREADS:+--threads $THREADS}
PY=${PYTHON:-python3}
mkdir -p "$OUT/runs" "$OUT/summary"
start=$(date +%s)

# -- the package, without its dependencies and without downloading anything
if ! "$PY" -c "import fedgdp" 2>/dev/null; then
    "$PY" -m pip install --quiet --no-deps --no-build-isolation -e . \
        || { echo "pip install failed; using PYTHONPATH=src" >&2; export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"; }
fi
if [ -d wheels ] && ls wheels/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install --quiet --no-deps --no-index wheels/*.whl
fi
FEDGDP=("$PY" -m fedgdp)
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    [ -e "data/mnist/$f" ] || [ -e data/mnist/mnist.npz ] || { echo "data/mnist/$f is missing" >&2; exit 2; }
done

# -- provenance
{
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "settings: WHAT=$WHAT READINGS=$READINGS N9=[$N9] M9=$M9 M10=[$M10] RUNS9=$RUNS9 RUNS10=$RUNS10 BUDGET_S=$BUDGET_S DEVICE=$DEVICE EXTRA=[$EXTRA]"
    "$PY" - <<'EOF'
import platform, torch
print("python:", platform.python_version(), "torch:", torch.__version__, "cuda:", torch.version.cuda,
      "cudnn:", torch.backends.cudnn.version() if torch.cuda.is_available() else None)
print("device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "| cpu threads:", torch.get_num_threads())
EOF
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
} > "$OUT/provenance.txt"
printf 'what\tseconds\n' > "$OUT/timings.tsv"

timed() {   # timed LABEL COMMAND...: run, append its wall seconds to timings.tsv
    local label=$1; shift
    local t0=$EPOCHREALTIME
    "$@"
    awk -v a="$t0" -v b="$EPOCHREALTIME" -v l="$label" 'BEGIN { printf "%s\t%.1f\n", l, b - a }' >> "$OUT/timings.tsv"
}

timed nn-bench "${FEDGDP[@]}" nn-bench --datasets mnist --sizes 40,480 --repeats 3 --rounds 1 \
    --device "$DEVICE" $THREADS --out "$OUT/bench.json" > /dev/null

# -- the readings map's missing pieces, within the budget
if [ "$WHAT" = readings ]; then
    mkdir -p "$OUT/readings/runs"
    if [ -n "$COMMITTED" ] && [ -d "$COMMITTED" ]; then
        for f in "$COMMITTED"/*/*.parquet; do
            mkdir -p "$OUT/readings/runs/$(basename "$(dirname "$f")")"
            ln -sf "$(realpath "$f")" "$OUT/readings/runs/$(basename "$(dirname "$f")")/"
        done
    fi
    left=$(( BUDGET_S - ($(date +%s) - start) )); [ "$left" -gt 0 ] || left=0
    timed "nn-readings --run" "${FEDGDP[@]}" nn-readings "$READINGS" --run --device "$DEVICE" $THREADS \
        --budget-s "$left" --runs-dir "$OUT/readings/runs" --out-dir "$OUT/readings" 2>&1 | tail -n 3
    echo "new pieces: $(find "$OUT/readings/runs" -name '*.parquet' -type f | wc -l)" | tee -a "$OUT/provenance.txt"
    echo "total: $(( $(date +%s) - start )) s" | tee -a "$OUT/provenance.txt"
    exit 0
fi

# -- the grid, run index by run index, within the budget
maxruns=$(( RUNS9 > RUNS10 ? RUNS9 : RUNS10 ))
for rep in $(seq 0 $((maxruns - 1))); do
    points=()
    [ "$rep" -lt "$RUNS9" ] && for n in $N9; do points+=("fig09 $M9 $n"); done
    [ "$rep" -lt "$RUNS10" ] && for m in $M10; do points+=("fig10 $m full"); done
    for point in "${points[@]}"; do
        read -r fig m n <<< "$point"
        if [ $(( $(date +%s) - start )) -ge "$BUDGET_S" ]; then
            echo "budget of ${BUDGET_S}s spent: stopped before $fig m=$m n=$n run $rep" | tee -a "$OUT/provenance.txt"
            break 2
        fi
        file="$OUT/runs/$fig~m~$m~n~$n~rep~$rep.parquet"
        timed "nn-run $fig m=$m n=$n run=$rep" "${FEDGDP[@]}" nn-run --figure "$fig" --dataset mnist --m "$m" \
            --n "$n" --run "$rep" --device "$DEVICE" $THREADS --data-dir data $EXTRA --out "$file"
    done
done

# -- summaries and figures (the rules summarise_nn and plot_nn)
for fig in fig09 fig10; do
    shopt -s nullglob
    files=("$OUT"/runs/"$fig"~*.parquet)
    shopt -u nullglob
    [ ${#files[@]} -gt 0 ] || continue
    timed "nn-summarise $fig" "${FEDGDP[@]}" nn-summarise "${files[@]}" --out "$OUT/summary/mnist_$fig.parquet"
    timed "nn-plot $fig" "${FEDGDP[@]}" nn-plot "$OUT/summary/mnist_$fig.parquet" --figure "$fig" \
        --out "$OUT/$fig.pdf" --csv "$OUT/summary/mnist_$fig.csv"
done
echo "total: $(( $(date +%s) - start )) s" | tee -a "$OUT/provenance.txt"
