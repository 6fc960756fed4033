#!/bin/bash
# Time the default run before and after a change, one after the other, twice each, each from
# a fresh clone (numba compiles in the run), then compare their outputs; optionally the
# speedup benchmark and Figures 7-8 on real MNIST. Run it on a quiet machine, from a clone:
#   scripts/time_runs.sh BASE_REV NEW_REV OUT_DIR [MNIST_DIR]
# Writes OUT_DIR/<label>.time (/usr/bin/time: wall, user, sys), <label>.log (with the
# snakemake/jobs CPU split of scripts/snakemake_rusage.py), rundiff-default.txt,
# speedup-*.json and, with MNIST_DIR (the four IDX files), mnist1/2.time.
# The clones use the python on PATH with PYTHONPATH=<clone>/src (the dependencies installed,
# e.g. `pip install -e '.[pipeline,dev]'` once).
set -u
BASE=$1; NEW=$2; OUT=$(realpath -m "$3"); MNIST=${4:-}
REPO=$(git rev-parse --show-toplevel); WORK=$(mktemp -d)
mkdir -p "$OUT"
clone() { git clone -q "$REPO" "$1" && git -C "$1" checkout -q "$2"; }
timed() {   # label dir snakemake-args...
  local label=$1 dir=$2; shift 2
  (cd "$dir" && uptime > "$OUT/$label.load" && PYTHONPATH="$dir/src" /usr/bin/time -f "%e s wall, %U user, %S sys" \
     -o "$OUT/$label.time" python "$REPO/scripts/snakemake_rusage.py" "$@" --cores 2 -q > "$OUT/$label.log" 2>&1)
  echo "$label: $(cat "$OUT/$label.time"); $(tail -1 "$OUT/$label.log")"
}
for i in 1 2; do
  for side in base new; do
    rev=$BASE; [ $side = new ] && rev=$NEW
    clone "$WORK/$side$i" "$rev" && timed "$side$i" "$WORK/$side$i"
  done
done
python -m fedgdp.commands.rundiff "$WORK/base1" "$WORK/new1" --run paper > "$OUT/rundiff-default.txt" 2>&1
echo "rundiff: $(tail -1 "$OUT/rundiff-default.txt")"
for i in 1 2; do
  (cd "$WORK/new1" && PYTHONPATH="$WORK/new1/src" python scripts/speedup.py --out "$OUT/speedup-new$i.json" | grep ratio)
done
(cd "$WORK/base1" && PYTHONPATH="$WORK/base1/src" python scripts/speedup.py --out "$OUT/speedup-base.json" | grep ratio)
if [ -n "$MNIST" ]; then
  for i in 1 2; do
    d="$WORK/mnist$i"; clone "$d" "$NEW" && mkdir -p "$d/data" && ln -s "$(realpath "$MNIST")" "$d/data/mnist"
    timed "mnist$i" "$d" fig07 fig08 --configfile=config/mnist.yaml
  done
fi
rm -rf "$WORK"
