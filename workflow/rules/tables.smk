# Table 1 (theory beside measurements at a reference cell) and the rates table.


rule tabulate_table1:
    input:
        table1_summaries,
    output:
        csv=report("figures/table1.csv", caption="../report/table1.rst", category="Tables",
                   labels={"table": "Table 1", "format": "CSV"}),
        md=report("figures/table1.md", caption="../report/table1.rst", category="Tables",
                  labels={"table": "Table 1", "format": "Markdown"}),
        tex=report("figures/table1.tex", caption="../report/table1.rst", category="Tables",
                   labels={"table": "Table 1", "format": "LaTeX"}),
    params:
        spec=table1_spec,
    log:
        "logs/tables/table1.log",
    conda:
        "../../environment.yml"
    shell:
        "fedgdp table table1 {input:q} --spec {params.spec:q}"
        " --csv {output.csv} --md {output.md} --tex {output.tex} > {log} 2>&1"


rule tabulate_rates:
    input:
        rates_summaries,
    output:
        csv=report("figures/rates.csv", caption="../report/rates.rst", category="Tables",
                   labels={"table": "Rates", "format": "CSV"}),
        md=report("figures/rates.md", caption="../report/rates.rst", category="Tables",
                  labels={"table": "Rates", "format": "Markdown"}),
    params:
        spec=rates_spec,
    log:
        "logs/tables/rates.log",
    conda:
        "../../environment.yml"
    shell:
        "fedgdp table rates {input:q} --spec {params.spec:q} --csv {output.csv} --md {output.md}"
        " > {log} 2>&1"
