# The claims report (figures/claims.{csv,md}): which of the paper's conclusions the
# results support, claim by claim and model by model (fedgdp.claims, `fedgdp claims`).
#   snakemake --cores 2 claims
# Reads the study summaries of the simulation claims C1-C4, the real-data files of
# Figures 7-8 (C5) and, when nn.in_default_target is true, the CNN summaries of
# Figures 9-10 (C6; otherwise C6 is reported as "not run"). Input and parameter
# functions: workflow/rules/claims_common.smk.


include: "claims_common.smk"


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
