#!/bin/bash
# Runs behind the figure 5 analogue (analysis/plot_train_interference.py): the same job with and without the
# interference policy, interleaved (without, with, without, with, ...), then the figure and the recovery target.
# Usage (repository root):  scripts/train_adaptive_interference.sh [EXTRA --key value overrides...]
# Environment: PYTHON, MPIEXEC, NP (4), OUT (results/interference), REPEATS (2), WITHIN (10),
#              CONFIG (jobs/configs/train-adaptive-interference.yaml).
set -euo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
OUT=${OUT:-results/interference}
NP=${NP:-4}
CONFIG=${CONFIG:-jobs/configs/train-adaptive-interference.yaml}
mkdir -p "$OUT"
uptime
for i in $(seq 1 "${REPEATS:-2}"); do
  $MPIEXEC -n "$NP" $PY -m hpcbench.train "$CONFIG" --policies '[]' --job_name "interference-without-$i" \
      --output "$OUT/without-$i.h5" --overwrite "$@"
  $MPIEXEC -n "$NP" $PY -m hpcbench.train "$CONFIG" --job_name "interference-with-$i" \
      --output "$OUT/with-$i.h5" --overwrite "$@"
done
uptime
$PY analysis/plot_train_interference.py "$OUT"/without-*.h5 "$OUT"/with-*.h5 --within "${WITHIN:-10}" \
    -o "$OUT/fig5.png"
