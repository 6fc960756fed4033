# One job per cell (model x study x sizes x m x mu x K) and block of replicates:
# every method of the study runs on the same replicate data.


rule simulate_cell:
    output:
        PLAN.paths.cell,
    params:
        cell=PLAN.cell_params,
    resources:
        runtime=PLAN.cell_runtime,
        mem_mb=PLAN.cell_mem_mb,
    log:
        f"{LOGS}/simulate_cell/{{model}}/{{study}}/sizes~{{sizes}}/m~{{m}}/mu~{{mu}}/K~{{K}}/seeds~{{first}}-{{last}}.log",
    benchmark:
        f"{BENCH}/simulate_cell/{{model}}/{{study}}/sizes~{{sizes}}/m~{{m}}/mu~{{mu}}/K~{{K}}/seeds~{{first}}-{{last}}.tsv"
    conda:
        "../envs/fedgdp.yaml"
    shell:
        "printf '%s\\n' {params.cell:q}"
        " | fedgdp simulate --params /dev/stdin --seeds {wildcards.first}-{wildcards.last}"
        " --out {output} > {log} 2>&1"
