# One summary per model and study: per cell and method, mean MSE, Monte Carlo SE,
# median, replicates, diverged count, mean rounds and floats sent.


rule summarise_study:
    input:
        PLAN.study_cell_files,
    output:
        PLAN.paths.summary,
    log:
        f"{LOGS}/summarise_study/{{model}}_{{study}}.log",
    benchmark:
        f"{BENCH}/summarise_study/{{model}}_{{study}}.tsv"
    conda:
        "../envs/fedgdp.yaml"
    resources:
        runtime=PLAN.short_runtime,
    shell:
        "fedgdp summarise {input:q} --out {output} > {log} 2>&1"


# The resolved config beside the outputs: rewritten whenever the config changes (its
# text is a parameter, and Snakemake reruns a job whose parameters changed).
rule save_config:
    output:
        report(
            PLAN.paths.config,
            caption="../report/config.rst",
            category="Config",
            labels={"file": "config.resolved.yaml", "run": RUN},
        ),
    log:
        f"{LOGS}/save_config/save_config.log",
    localrule: True
    conda:
        "../envs/fedgdp.yaml"
    params:
        text=PLAN.resolved_config_text,
    shell:
        "printf '%s' {params.text:q} > {output} 2> {log}"
