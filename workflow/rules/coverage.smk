# The coverage study of FederatedGLM.summary()'s intervals (config `coverage`;
# fedgdp.api.coverage, docs/methods.md §10): one job per cell (family, m, n_i, mu,
# method) of `replicates` fits, then the table and the figure. Not in the default
# target: `snakemake --cores 2 coverage`.


if PLAN.config.get("coverage"):

    rule coverage_cell:
        input:
            config=PLAN.paths.config,
        output:
            f"results/{RUN}/coverage/{{cell}}.parquet",
        log:
            f"{LOGS}/coverage_cell/{{cell}}.log",
        benchmark:
            f"{BENCH}/coverage_cell/{{cell}}.tsv"
        wildcard_constraints:
            cell=PLAN.coverage_constraint(),
        conda:
            "../envs/fedgdp.yaml"
        resources:
            runtime=PLAN.short_runtime,
        params:
            spec=PLAN.coverage_cell_spec,
        shell:
            "fedgdp coverage-cell --spec {params.spec:q} --out {output} > {log} 2>&1"

    rule coverage_table:
        input:
            cells=PLAN.coverage_cell_files,
            config=PLAN.paths.config,
        output:
            csv=report(
                f"{TABLES}/coverage.csv",
                caption="../report/coverage.rst",
                category="Coverage",
                labels={"output": "table", "format": "CSV", "run": RUN},
            ),
            md=report(
                f"{TABLES}/coverage.md",
                caption="../report/coverage.rst",
                category="Coverage",
                labels={"output": "table", "format": "Markdown", "run": RUN},
            ),
            pdf=report(
                f"figures/{RUN}/coverage.pdf",
                caption="../report/coverage.rst",
                category="Coverage",
                labels={"output": "figure", "format": "PDF", "run": RUN},
            ),
            png=report(
                f"figures/{RUN}/coverage.png",
                caption="../report/coverage.rst",
                category="Coverage",
                labels={"output": "figure", "format": "PNG", "run": RUN},
            ),
        log:
            f"{LOGS}/coverage_table/coverage.log",
        benchmark:
            f"{BENCH}/coverage_table/coverage.tsv"
        conda:
            "../envs/fedgdp.yaml"
        resources:
            runtime=PLAN.short_runtime,
        params:
            spec=PLAN.coverage_spec,
            caption=PLAN.coverage_caption,
        shell:
            "fedgdp coverage {input.cells:q} --spec {params.spec:q} --csv {output.csv} --md {output.md}"
            " --pdf {output.pdf} --png {output.png} > {log} 2>&1"
