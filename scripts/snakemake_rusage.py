"""Run Snakemake in this process and print where its CPU time went.

``python scripts/snakemake_rusage.py ARGS...`` runs ``snakemake ARGS...`` and prints, on
standard error, the wall time, the CPU seconds of the Snakemake process itself and those
of its children (the jobs), from ``getrusage``: the split that ``/usr/bin/time`` does
not give. Used by ``scripts/time_runs.sh``.
"""
from __future__ import annotations

import resource
import sys
import time


def main(argv: list[str]) -> int:
    """Run Snakemake with ``argv`` and print the rusage line.

    Parameters
    ----------
    argv : list of str
        Snakemake's arguments.

    Returns
    -------
    int
        Snakemake's exit status.
    """
    from snakemake.cli import main as snakemake

    t0 = time.time()
    code = 0
    try:
        snakemake(argv)
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    me, jobs = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"wall {time.time() - t0:.1f} s, snakemake itself {me.ru_utime + me.ru_stime:.1f} CPU-s, "
          f"its jobs {jobs.ru_utime + jobs.ru_stime:.1f} CPU-s", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
