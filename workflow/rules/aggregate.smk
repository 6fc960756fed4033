# One summary per model and study: per cell and method, mean MSE, Monte Carlo SE,
# median, replicates, diverged count, mean rounds and floats sent.


rule summarise_study:
    input:
        study_cell_files,
    output:
        "results/summary/{model}_{study}.parquet",
    log:
        "logs/summarise/{model}_{study}.log",
    benchmark:
        "benchmarks/summarise/{model}_{study}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "fedgdp summarise {input:q} --out {output} > {log} 2>&1"
