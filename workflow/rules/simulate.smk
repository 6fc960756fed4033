# One job per cell (model x study x sizes x m x mu x K) and block of replicates:
# every method of the study runs on the same replicate data.


rule simulate_cell:
    output:
        "results/cells/{model}/{study}/sizes~{sizes}/m~{m}/mu~{mu}/K~{K}/seeds~{first}-{last}.parquet",
    params:
        cell=cell_params,
    log:
        "logs/simulate/{model}/{study}/sizes~{sizes}/m~{m}/mu~{mu}/K~{K}/seeds~{first}-{last}.log",
    benchmark:
        "benchmarks/simulate/{model}/{study}/sizes~{sizes}/m~{m}/mu~{mu}/K~{K}/seeds~{first}-{last}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "printf '%s\\n' {params.cell:q}"
        " | fedgdp simulate --params /dev/stdin --seeds {wildcards.first}-{wildcards.last}"
        " --out {output} > {log} 2>&1"
