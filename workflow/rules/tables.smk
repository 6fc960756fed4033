# Table 1 (theory beside measurements at a reference cell), the rates table and the
# claims report (which of the paper's conclusions the results support), in tables/<run>/.


rule tabulate_table1:
    input:
        summaries=PLAN.table1_summaries,
        config=PLAN.paths.config,
    output:
        csv=report(
            f"{TABLES}/table1.csv",
            caption="../report/table1.rst",
            category="Tables",
            labels=PLAN.table_labels("table1", "CSV"),
        ),
        md=report(
            f"{TABLES}/table1.md",
            caption="../report/table1.rst",
            category="Tables",
            labels=PLAN.table_labels("table1", "Markdown"),
        ),
        tex=report(
            f"{TABLES}/table1.tex",
            caption="../report/table1.rst",
            category="Tables",
            labels=PLAN.table_labels("table1", "LaTeX"),
        ),
    log:
        f"{LOGS}/tabulate_table1/table1.log",
    conda:
        "../envs/fedgdp.yaml"
    resources:
        runtime=PLAN.short_runtime,
    params:
        spec=PLAN.table1_spec,
        caption=PLAN.table1_caption,
    shell:
        "fedgdp table table1 {input.summaries:q} --spec {params.spec:q}"
        " --csv {output.csv} --md {output.md} --tex {output.tex} > {log} 2>&1"


rule tabulate_rates:
    input:
        summaries=PLAN.rates_summaries,
        config=PLAN.paths.config,
    output:
        csv=report(
            f"{TABLES}/rates.csv",
            caption="../report/rates.rst",
            category="Tables",
            labels=PLAN.table_labels("rates", "CSV"),
        ),
        md=report(
            f"{TABLES}/rates.md",
            caption="../report/rates.rst",
            category="Tables",
            labels=PLAN.table_labels("rates", "Markdown"),
        ),
    log:
        f"{LOGS}/tabulate_rates/rates.log",
    conda:
        "../envs/fedgdp.yaml"
    resources:
        runtime=PLAN.short_runtime,
    params:
        spec=PLAN.rates_spec,
        caption=PLAN.rates_caption,
    shell:
        "fedgdp table rates {input.summaries:q} --spec {params.spec:q} --csv {output.csv}"
        " --md {output.md} > {log} 2>&1"


rule assess_claims:
    input:
        summaries=PLAN.claims_summaries,
        realdata=PLAN.claims_realdata_files,
        nn=PLAN.claims_nn_summaries,
        config=PLAN.paths.config,
    output:
        csv=report(
            f"{TABLES}/claims.csv",
            caption="../report/claims.rst",
            category="Claims",
            labels=PLAN.table_labels("claims", "CSV"),
        ),
        md=report(
            f"{TABLES}/claims.md",
            caption="../report/claims.rst",
            category="Claims",
            labels=PLAN.table_labels("claims", "Markdown"),
        ),
    log:
        f"{LOGS}/assess_claims/claims.log",
    conda:
        "../envs/fedgdp.yaml"
    resources:
        runtime=PLAN.short_runtime,
    params:
        spec=PLAN.claims_spec,
        caption=PLAN.claims_caption,
    shell:
        "fedgdp claims --summaries {input.summaries:q} --realdata {input.realdata:q}"
        " --nn {input.nn:q} --spec {params.spec:q} --csv {output.csv} --md {output.md} > {log} 2>&1"
