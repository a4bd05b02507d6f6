#!/bin/bash
# Runs behind the pipeline figures (analysis/plot_pipeline.py): 160 layers, emulated compute,
# 1 Gbit/s modelled links, at 4..64 stages, for half the devices 4x slower ("4:1"), for speeds
# drawn from the bundled AI-Benchmark device trace, and for equal speeds (bubble check).
# Sky's MILP gets 60 s here (the 300 s figure is in python -m hpcbench.pipeline.bench).
# Usage (repository root):  scripts/pipeline_figures.sh [STAGES...]   (default: 4 8 16 32 64)
set -euo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
OUT=${OUT:-results/pipeline}
mkdir -p "$OUT"
for p in "${@:-4 8 16 32 64}"; do
  for p1 in $p; do
    dil=1; if [ "$p1" -ge 32 ]; then dil=4; fi   # dilate where actions are short against Python's overheads
    common=(jobs/configs/pipeline-sky.yaml --milp_time_limit_s 60 --iterations 3 --time_dilation $dil --overwrite)
    $MPIEXEC -n "$p1" $PY -m hpcbench.pipeline "${common[@]}" --job_name sky-4to1 --devices.speed "'4:1'" \
        --output "$OUT/sky-4to1-p$p1.h5"
    $MPIEXEC -n "$p1" $PY -m hpcbench.pipeline "${common[@]}" --job_name sky-trace --devices.speed trace \
        --output "$OUT/sky-trace-p$p1.h5"
    $MPIEXEC -n "$p1" $PY -m hpcbench.pipeline "${common[@]}" --job_name uniform --devices.speed "'1:1'" \
        --allocators '[even]' --output "$OUT/uniform-p$p1.h5"
  done
done
$PY analysis/plot_pipeline.py "$OUT"/*.h5 -o "$OUT/pipeline.png"
