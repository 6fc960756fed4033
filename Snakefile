# fedgdp: reproduce the simulation study of Peng, Paul & Auddy, "Statistical Limits
# and Efficient Algorithms for Differentially Private Federated Learning".
#   snakemake --cores 2                      every figure and table of config.yaml (run paper)
#   snakemake --cores 2 fig03                one figure and only what it needs
#   snakemake --cores 2 --configfile config/smoke.yaml    the smoke run (outputs under smoke/)
#   snakemake --report reports/paper.html    the figures and tables with captions
#   snakemake --cores 2 decompose            the error decomposition (not in the default target)
#   snakemake --cores 2 coverage             the intervals' coverage study (not in the default target)
# Every decision lives in fedgdp.plan (the rules are thin wrappers around it).
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
include: "workflow/rules/sensitivity.smk"
include: "workflow/rules/decomposition.smk"
include: "workflow/rules/coverage.smk"
include: "workflow/rules/audit.smk"


rule all:
    default_target: True
    input:
        TARGETS["all"],


include: "workflow/rules/requests.smk"
