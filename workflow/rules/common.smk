# Shared set-up: the plan of this config (fedgdp.plan, unit-tested without
# Snakemake) and the few things only Snakemake can do. No rules here.
#   PLAN: config checks, the run name and its output tree, cells, targets, job specs,
#   captions and resources; the rules below call its methods.
import os
import shlex
import shutil
import sys

from snakemake.exceptions import WorkflowError

from fedgdp import plan

# --configfile and --config settings of this invocation: they decide the run name
_given = plan.invocation_overrides(
    workflow.config_settings.configfiles, workflow.config_settings.config
)
try:
    PLAN = plan.load(
        config, workflow.source_path("../schemas/config.schema.yaml"), _given
    )
except plan.ConfigError as exc:
    raise WorkflowError(str(exc)) from None
config["run"] = PLAN.run
RUN = PLAN.run
TABLES = PLAN.paths.tables
LOGS = PLAN.paths.logs
BENCH = PLAN.paths.benchmarks
TARGETS = PLAN.targets()
print(
    f"fedgdp: run {RUN} (config {PLAN.sha}): results/{RUN}/, figures/{RUN}/, {TABLES}/",
    file=sys.stderr,
)
if (
    PLAN.run_warning()
):  # e.g. --config run=paper with changed settings: results of two configs
    print(PLAN.run_warning(), file=sys.stderr)

# The job commands call `fedgdp`; when Snakemake runs from a virtual environment that
# is not activated, put that environment's scripts first on the PATH of every job
# (a prefix replaces Snakemake's own, so it repeats its bash strict mode).
if shutil.which("fedgdp") is None:
    shell.prefix(
        'set -euo pipefail; export PATH={}:"$PATH"; '.format(
            shlex.quote(os.path.dirname(sys.executable))
        )
    )


wildcard_constraints:
    model=PLAN.constraints()["model"],
    study=PLAN.constraints()["study"],
    cells=PLAN.constraints()["cells"],
    first=PLAN.constraints()["first"],
    last=PLAN.constraints()["last"],
    method=PLAN.constraints()["method"],
