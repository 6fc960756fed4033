# Table 1 (theory beside measurements at a reference cell) and the rates table, in
# tables/<run>/. (Reserved: tables/<run>/claims.{csv,md}, see Plan.targets.)


rule tabulate_table1:
    input:
        summaries=PLAN.table1_summaries,
        config=PLAN.paths.config,
    output:
        csv=report(f"{TABLES}/table1.csv", caption="../report/table1.rst", category="Tables",
                   labels=PLAN.table_labels("table1", "CSV")),
        md=report(f"{TABLES}/table1.md", caption="../report/table1.rst", category="Tables",
                  labels=PLAN.table_labels("table1", "Markdown")),
        tex=report(f"{TABLES}/table1.tex", caption="../report/table1.rst", category="Tables",
                   labels=PLAN.table_labels("table1", "LaTeX")),
    params:
        spec=PLAN.table1_spec,
        caption=PLAN.table1_caption,
    resources:
        runtime=PLAN.short_runtime,
    log:
        f"{LOGS}/tabulate_table1/table1.log",
    conda:
        "../envs/fedgdp.yaml"
    shell:
        "fedgdp table table1 {input.summaries:q} --spec {params.spec:q}"
        " --csv {output.csv} --md {output.md} --tex {output.tex} > {log} 2>&1"


rule tabulate_rates:
    input:
        summaries=PLAN.rates_summaries,
        config=PLAN.paths.config,
    output:
        csv=report(f"{TABLES}/rates.csv", caption="../report/rates.rst", category="Tables",
                   labels=PLAN.table_labels("rates", "CSV")),
        md=report(f"{TABLES}/rates.md", caption="../report/rates.rst", category="Tables",
                  labels=PLAN.table_labels("rates", "Markdown")),
    params:
        spec=PLAN.rates_spec,
        caption=PLAN.rates_caption,
    resources:
        runtime=PLAN.short_runtime,
    log:
        f"{LOGS}/tabulate_rates/rates.log",
    conda:
        "../envs/fedgdp.yaml"
    shell:
        "fedgdp table rates {input.summaries:q} --spec {params.spec:q} --csv {output.csv}"
        " --md {output.md} > {log} 2>&1"
