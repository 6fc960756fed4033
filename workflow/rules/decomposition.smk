# The error decomposition (beyond the paper; fedgdp.reports.decomposition, docs/methods.md §9):
# one job reads every cell of the three decomposition studies (private, clip_only,
# plain; same replicate data) and writes the table and the figure. Not in the default
# target: `snakemake --cores 2 decompose`.


if PLAN.config.get("decomposition"):

    rule decompose_errors:
        input:
            cells=PLAN.decomposition_cell_files,
            config=PLAN.paths.config,
        output:
            csv=report(
                f"{TABLES}/decomposition.csv",
                caption="../report/decomposition.rst",
                category="Decomposition",
                labels=PLAN.decomposition_labels("table", "CSV"),
            ),
            md=report(
                f"{TABLES}/decomposition.md",
                caption="../report/decomposition.rst",
                category="Decomposition",
                labels=PLAN.decomposition_labels("table", "Markdown"),
            ),
            pdf=report(
                f"figures/{RUN}/decomposition.pdf",
                caption="../report/decomposition.rst",
                category="Decomposition",
                labels=PLAN.decomposition_labels("figure", "PDF"),
            ),
            png=report(
                f"figures/{RUN}/decomposition.png",
                caption="../report/decomposition.rst",
                category="Decomposition",
                labels=PLAN.decomposition_labels("figure", "PNG"),
            ),
        log:
            f"{LOGS}/decompose_errors/decomposition.log",
        benchmark:
            f"{BENCH}/decompose_errors/decomposition.tsv"
        conda:
            "../envs/fedgdp.yaml"
        resources:
            runtime=PLAN.short_runtime,
        params:
            spec=PLAN.decomposition_spec,
            caption=PLAN.decomposition_caption,
        shell:
            "fedgdp decompose {input.cells:q} --spec {params.spec:q} --csv {output.csv} --md {output.md}"
            " --pdf {output.pdf} --png {output.png} > {log} 2>&1"
