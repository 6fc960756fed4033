# The claims report (figures/claims.{csv,md}): which of the paper's conclusions the
# results support, claim by claim and model by model (fedgdp.claims, `fedgdp claims`).
#   snakemake --cores 2 claims
# Reads the study summaries of the simulation claims C1-C4, the real-data files of
# Figures 7-8 (C5) and, when nn.in_default_target is true, the CNN summaries of
# Figures 9-10 (C6; otherwise C6 is reported as "not run"). Self-contained: its
# helpers are below, not in common.smk.
from fedgdp.claims import DEFAULT_STUDIES as CLAIM_STUDIES


def claims_studies():
    """Claim -> studies of the config it reads (missing studies are left out)."""
    return {claim: [s for s in studies if s in config["studies"]]
            for claim, studies in CLAIM_STUDIES.items()}


def claims_summaries(wildcards):
    studies = dict.fromkeys(s for ss in claims_studies().values() for s in ss)
    return [summary_file(model, s) for s in studies for model in config["studies"][s]["models"]]


def claims_realdata_files(wildcards):
    rd = config.get("realdata")
    if not rd:
        return []
    return [realdata_split_file(task, split) for task in rd["tasks"] for split in range(rd["splits"])]


def claims_nn_summaries(wildcards):
    s = config.get("nn", {})
    if not s.get("in_default_target"):
        return []
    return [NN_SUMMARY.format(dataset=ds, nfig=nfig) for ds in s["datasets"] for nfig in NN_FIGURES]


def claims_spec(wildcards):
    models = list(dict.fromkeys(m for s in config["studies"].values() for m in s["models"]))
    return json.dumps({"models": models, "studies": claims_studies()}, sort_keys=True)


rule assess_claims:
    input:
        summaries=claims_summaries,
        realdata=claims_realdata_files,
        nn=claims_nn_summaries,
    output:
        csv=report("figures/claims.csv", caption="../report/claims.rst", category="Claims",
                   labels={"table": "Claims", "format": "CSV"}),
        md=report("figures/claims.md", caption="../report/claims.rst", category="Claims",
                  labels={"table": "Claims", "format": "Markdown"}),
    params:
        spec=claims_spec,
    log:
        "logs/claims.log",
    conda:
        "../../environment.yml"
    shell:
        "fedgdp claims --summaries {input.summaries:q} --realdata {input.realdata:q}"
        " --nn {input.nn:q} --spec {params.spec:q} --csv {output.csv} --md {output.md} > {log} 2>&1"


rule claims:
    input:
        "figures/claims.csv",
        "figures/claims.md",
    localrule: True
