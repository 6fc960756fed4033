"""Checks of the SLURM CI run (.ci/slurm.sh): did the cells go through sbatch, and are
the results those of a local run?

    python .ci/slurm_check.py LOCAL_DIR SLURM_DIR SNAKEMAKE_LOG SQUEUE_DUMP

LOCAL_DIR and SLURM_DIR are two copies of the workflow, run with `--cores 2` and with
the slurm profile; SNAKEMAKE_LOG is the SLURM run's output; SQUEUE_DUMP is
`squeue --states=all --noheader --format='%i|%T|%C|%m|%l|%M|%k'` after it. Exits 1
when a check fails.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pyarrow.parquet as pq


def slurm_job_id(path: Path) -> str | None:
    meta = pq.read_schema(path).metadata or {}
    value = meta.get(b"slurm_job_id")
    return value.decode() if value else None


def main(local: Path, slurm: Path, log: Path, squeue: Path) -> int:
    failed = []

    # 0. SLURM's own record: every submission ran and completed.
    records = [line.split("|", 6) for line in squeue.read_text().splitlines() if line.strip()]
    print("SLURM's record of the run (squeue --states=all):")
    print(f"  {'id':>4} {'state':<10} {'cpus':>4} {'memory':>7} {'limit':>8} {'elapsed':>8}  comment")
    for jobid, state, cpus, mem, limit, elapsed, comment in records:
        print(f"  {jobid:>4} {state:<10} {cpus:>4} {mem:>7} {limit:>8} {elapsed:>8}  {comment[:60]}")

    # 1. Every cell file of the SLURM run was written inside a SLURM job, and only
    #    jobs that Snakemake submitted with sbatch (ids from its log).
    submitted = set(re.findall(r"submitted with SLURM jobid (\d+)", log.read_text()))
    cells = sorted(slurm.glob("results/*/cells/**/*.parquet"))
    ids = {p: slurm_job_id(p) for p in cells}
    missing = [p for p, i in ids.items() if i is None]
    foreign = sorted({i for i in ids.values() if i is not None} - submitted)
    cell_jobs = sorted({i for i in ids.values() if i is not None}, key=int)
    summaries = sorted(slurm.glob("results/*/summary/*.parquet"))
    summary_jobs = sorted({slurm_job_id(p) or "none" for p in summaries})
    print(f"jobs through sbatch: {len(submitted)} submissions; {len(cells)} cell files, "
          f"{len(cells) - len(missing)} with a slurm_job_id, written by {len(cell_jobs)} "
          f"SLURM jobs ({', '.join(cell_jobs)}); summaries by SLURM job {', '.join(summary_jobs)}")
    completed = {r[0] for r in records if r[1] == "COMPLETED"}
    if submitted - completed:
        failed.append(f"submitted but not COMPLETED in squeue: {sorted(submitted - completed, key=int)}")
    if not cells:
        failed.append("the SLURM run wrote no cell files")
    if missing:
        failed.append(f"{len(missing)} cell files lack slurm_job_id, e.g. {missing[0]}")
    if foreign:
        failed.append(f"cell files name SLURM jobs Snakemake did not submit: {foreign}")
    local_ids = [p for p in local.glob("results/*/cells/**/*.parquet") if slurm_job_id(p)]
    if local_ids:
        failed.append(f"{len(local_ids)} cell files of the local run carry a slurm_job_id")

    # 2. The same files, and the same numbers: the summaries (data and schema; the
    #    provenance metadata differs by design) and the tables' CSV files.
    def rel(root: Path, pattern: str) -> set[str]:
        return {str(p.relative_to(root)) for p in root.glob(pattern)}

    for pattern in ("results/*/cells/**/*.parquet", "results/*/summary/*.parquet",
                    "tables/*/*.csv", "figures/*/*.pdf", "figures/*/*.png"):
        a, b = rel(local, pattern), rel(slurm, pattern)
        if a != b:
            failed.append(f"{pattern}: only local {sorted(a - b)[:3]}, only slurm {sorted(b - a)[:3]}")
    names = sorted(rel(local, "results/*/summary/*.parquet"))
    differ = [n for n in names
              if not pq.read_table(local / n).equals(pq.read_table(slurm / n), check_metadata=False)]
    csvs = sorted(rel(local, "tables/*/*.csv"))
    differ += [n for n in csvs if (local / n).read_bytes() != (slurm / n).read_bytes()]
    print(f"summaries equal to the local --cores 2 run: {len(names) - len([d for d in differ if d in names])}"
          f"/{len(names)} summary files identical, {len(csvs) - len([d for d in differ if d in csvs])}"
          f"/{len(csvs)} table CSV files identical")
    if not names:
        failed.append("no summaries to compare")
    if differ:
        failed.append(f"differ between the local and the SLURM run: {differ}")

    for msg in failed:
        print(f"FAILED: {msg}")
    print("SLURM check " + ("failed" if failed else "passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*(Path(a) for a in sys.argv[1:])))
