# The privacy audit of this run's settings (fedgdp.audit, fedgdp.commands.empirical,
# docs/methods.md §2): the search for every release's worst neighbouring pair beside
# its recorded sensitivity, and the distinguishing test's empirical lower bound on mu
# (figure audit). Not in the default target: `snakemake --cores 2 audit`.


rule audit_privacy:
    input:
        config=PLAN.paths.config,
    output:
        csv=report(
            f"{TABLES}/audit.csv",
            caption="../report/audit.rst",
            category="Privacy audit",
            labels={"table": "audit", "format": "CSV"},
        ),
        md=report(
            f"{TABLES}/audit.md",
            caption="../report/audit.rst",
            category="Privacy audit",
            labels={"table": "audit", "format": "Markdown"},
        ),
        emp=f"figures/{RUN}/audit.csv",
        pdf=report(
            f"figures/{RUN}/audit.pdf",
            caption="../report/audit.rst",
            category="Privacy audit",
            labels={"figure": "empirical mu", "format": "PDF"},
        ),
        png=report(
            f"figures/{RUN}/audit.png",
            caption="../report/audit.rst",
            category="Privacy audit",
            labels={"figure": "empirical mu", "format": "PNG"},
        ),
    log:
        f"{LOGS}/audit_privacy/audit.log",
    benchmark:
        f"{BENCH}/audit_privacy/audit.tsv"
    conda:
        "../envs/fedgdp.yaml"
    resources:
        runtime=PLAN.short_runtime,
    params:
        table=lambda w, output: output.csv.removesuffix(".csv"),
        figure=lambda w, output: output.pdf.removesuffix(".pdf"),
    shell:
        "fedgdp audit --configfile {input.config:q} --table {params.table:q} --empirical {params.figure:q}"
        " > {log} 2>&1"
