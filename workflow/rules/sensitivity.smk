# The sensitivity study (config `sensitivity`; docs/methods.md §8): its simulation studies
# sens_<variant>_<claim> run through simulate_cell and summarise_study like any study;
# here, its real-data fits (C5) and the claims map. Target: `snakemake --cores 2 sensitivity`.
if PLAN.sensitivity():

    rule fit_realdata_variant:
        input:
            PLAN.sensitivity_realdata_data_files,
        output:
            f"results/{RUN}/sensitivity/realdata/{{variant}}/{{dataset}}/{{task}}/split~{{split}}.parquet",
        log:
            f"{LOGS}/fit_realdata_variant/{{variant}}/{{dataset}}/{{task}}/split~{{split}}.log",
        benchmark:
            f"{BENCH}/fit_realdata_variant/{{variant}}/{{dataset}}/{{task}}/split~{{split}}.tsv"
        wildcard_constraints:
            variant=PLAN.sensitivity_constraints()["variant"],
            dataset=PLAN.sensitivity_constraints()["dataset"],
            task=PLAN.sensitivity_constraints()["task"],
            split=PLAN.sensitivity_constraints()["split"],
        conda:
            "../envs/fedgdp.yaml"
        threads: PLAN.realdata_workers
        resources:
            runtime=PLAN.realdata_runtime,
            mem_mb=PLAN.realdata_mem_mb,
        params:
            spec=PLAN.sensitivity_realdata_spec,
        shell:
            "fedgdp realdata --spec {params.spec:q} --task {wildcards.task} --split {wildcards.split}"
            " --workers {threads} --verbose --out {output} > {log} 2>&1"

    rule claims_map:
        input:
            summaries=PLAN.sensitivity_summaries,
            realdata=PLAN.sensitivity_realdata_files,
            config=PLAN.paths.config,
        output:
            csv=report(
                f"{TABLES}/claims_map.csv",
                caption="../report/sensitivity.rst",
                category="Sensitivity",
                labels={"table": "Claims map", "format": "CSV", "run": RUN},
            ),
            md=report(
                f"{TABLES}/claims_map.md",
                caption="../report/sensitivity.rst",
                category="Sensitivity",
                labels={"table": "Claims map", "format": "Markdown", "run": RUN},
            ),
            pdf=report(
                f"figures/{RUN}/claims_map.pdf",
                caption="../report/sensitivity.rst",
                category="Sensitivity",
                labels={"table": "Claims map", "format": "PDF", "run": RUN},
            ),
            png=report(
                f"figures/{RUN}/claims_map.png",
                caption="../report/sensitivity.rst",
                category="Sensitivity",
                labels={"table": "Claims map", "format": "PNG", "run": RUN},
            ),
        log:
            f"{LOGS}/claims_map/claims_map.log",
        benchmark:
            f"{BENCH}/claims_map/claims_map.tsv"
        conda:
            "../envs/fedgdp.yaml"
        resources:
            runtime=PLAN.short_runtime,
        params:
            spec=PLAN.sensitivity_map_spec,
            caption=PLAN.sensitivity_caption,
        shell:
            "fedgdp claims-map --summaries {input.summaries:q} --realdata {input.realdata:q}"
            " --spec {params.spec:q} --csv {output.csv} --md {output.md} --pdf {output.pdf}"
            " --png {output.png} > {log} 2>&1"
