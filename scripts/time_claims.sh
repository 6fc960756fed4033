#!/bin/bash
# Measure the time claims of the README and the docs at HEAD, twice each, each from a fresh clone
# of HEAD's tracked files, and record the machine's load beside each (the claims cite the result):
#   scripts/time_claims.sh OUT_DIR [LABEL...]      # labels: fast-lane smoke fig03 default (report follows default)
# Writes OUT_DIR/<label>-<i>.time (/usr/bin/time: wall, user, sys), <label>-<i>.load (UTC date and
# /proc/loadavg before and after, the commit) and times.md, the table of all of them. The clones
# use the python on PATH with PYTHONPATH=<clone>/src (the dev and pipeline extras installed once).
set -u
OUT=$(realpath -m "$1"); shift
LABELS=${*:-fast-lane smoke fig03 default}
REPO=$(git rev-parse --show-toplevel); WORK=$(mktemp -d)
mkdir -p "$OUT"
timed() {   # label dir command...   (the commit is the clone's own: HEAD when it was cloned)
  local label=$1 dir=$2; shift 2
  { echo "commit $(git -C "$dir" rev-parse --short HEAD)"
    echo "start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$OUT/$label.load"
  (cd "$dir" && PYTHONPATH="$dir/src" /usr/bin/time -f "%e s wall, %U user, %S sys" -o "$OUT/$label.time" \
     "$@" > "$OUT/$label.log" 2>&1)
  echo "end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/$label.load"
  echo "$label: $(cat "$OUT/$label.time")"
}
for i in 1 2; do
  for label in $LABELS; do
    d="$WORK/$label$i"; git clone -q "$REPO" "$d"
    case $label in
      fast-lane) timed "fast-lane-$i" "$d" python -m pytest -q -m "not slow" -p no:cacheprovider ;;
      smoke) timed "smoke-$i" "$d" snakemake --cores 2 --configfile config/smoke.yaml -q ;;
      fig03) timed "fig03-$i" "$d" snakemake --cores 2 fig03 -q ;;
      default) timed "default-$i" "$d" snakemake --cores 2 -q
               timed "report-$i" "$d" snakemake --report results/paper/report.html -q ;;
    esac
    rm -rf "$d"
  done
done
rm -rf "$WORK"
python - "$OUT" <<'PY'
import re, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = ["| measurement | commit | wall s | CPU s (user + sys) | load average (1, 5, 15 min) at start; at end | start (UTC) |",
        "|---|---|---:|---:|---|---|"]
for t in sorted(out.glob("*.time")):
    text = t.read_text()    # "[Command exited with non-zero status N]\n<wall> s wall, <user> user, <sys> sys"
    wall, user, sys_ = map(float, re.search(r"([\d.]+) s wall, ([\d.]+) user, ([\d.]+) sys", text).groups())
    failed = re.search(r"non-zero status (\d+)", text)
    load = t.with_suffix(".load").read_text().splitlines()
    start, end = load[1].split(), load[2].split()
    stem = f"{t.stem} (exit {failed.group(1)})" if failed else t.stem
    rows.append(f"| {stem} | {load[0].split()[1]} | {wall:.0f} | {user + sys_:.0f} ({user:.0f} + {sys_:.0f}) | "
                f"{' '.join(start[3:6])}; {' '.join(end[3:6])} | {start[1]} |")
(out / "times.md").write_text("Made by `scripts/time_claims.sh` (each from a fresh clone; `*.time`, `*.load` beside).\n\n"
                              + "\n".join(rows) + "\n")
PY
cat "$OUT/times.md"
