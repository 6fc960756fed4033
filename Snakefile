# fedgdp: reproduce the simulation study of Peng, Paul & Auddy, "Statistical Limits
# and Efficient Algorithms for Differentially Private Federated Learning".
#   snakemake --cores 2                      every figure and table of config.yaml
#   snakemake --cores 2 fig03                one figure and only what it needs
#   snakemake --report report.html           the figures and tables with captions
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/realdata.smk"
include: "workflow/rules/nn.smk"
include: "workflow/rules/claims.smk"


rule all:
    default_target: True
    input:
        all_targets(),
        realdata_targets(),
        nn_default_targets(),
        "figures/claims.csv",
        "figures/claims.md",
