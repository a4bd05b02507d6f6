#!/bin/bash
# Runs behind the figure 4 analogue (analysis/plot_train_adaptive.py): per task, the adaptive batch
# (gns_batch, KungFu's artifact rule) against a fixed small and a fixed large per-worker batch, real compute.
# Usage (repository root):  scripts/train_adaptive_gns.sh [TASK...]     (default: digits shakespeare)
# Environment: PYTHON, MPIEXEC, NP (2), OUT (results/train), SMALL (16), LARGE (128),
#              TARGET_digits (0.95), TARGET_shakespeare (0.30): the accuracies the figure's times are read at.
set -euo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
OUT=${OUT:-results/train}
NP=${NP:-2}
mkdir -p "$OUT"
for task in ${@:-digits shakespeare}; do
  cfg=jobs/configs/train-adaptive-gns-$task.yaml
  $MPIEXEC -n "$NP" $PY -m hpcbench.train "$cfg" --output "$OUT/gns-$task-adaptive.h5" --overwrite
  for b in "${SMALL:-16}" "${LARGE:-128}"; do
    $MPIEXEC -n "$NP" $PY -m hpcbench.train "$cfg" --policies '[]' --monitors '[]' --batch_size "$b" \
        --job_name "gns-$task-fixed-$b" --output "$OUT/gns-$task-fixed-$b.h5" --overwrite
  done
  target_var=TARGET_$task
  default=0.95; if [ "$task" = shakespeare ]; then default=0.30; fi
  $PY analysis/plot_train_adaptive.py "$OUT"/gns-$task-adaptive.h5 "$OUT"/gns-$task-fixed-*.h5 \
      --target "${!target_var:-$default}" -o "$OUT/fig4-$task.png"
done
