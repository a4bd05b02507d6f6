#!/bin/bash
# Runs behind the figure 4 analogue (analysis/plot_train_adaptive.py): per task, the adaptive batch
# (gns_batch, KungFu's artifact rule) against a fixed small and a fixed large per-worker batch.
# Usage (repository root):  scripts/train_adaptive_gns.sh [TASK...]
#   TASK: digits, shakespeare (real compute, NP ranks; the default) or digits-16, shakespeare-16 (16 ranks, the
#   modelled step clock of hpcbench.train.steps.stepclock: one compute profile per batch is first timed at one rank
#   alone, launched by $MPIEXEC1, e.g. behind a command that waits for a quiet machine, and all three runs
#   price their steps with it).
# Environment: PYTHON, MPIEXEC, MPIEXEC1 ($MPIEXEC), NP (2), OUT (results/train), SMALL / LARGE (16 / 128; the -16 tasks 2 / 16),
#              SCALE_LR (empty; 1: also gns_batch with linear learning-rate scaling, job gns-TASK-adaptive-lr),
#              TARGET_digits ("0.90 0.95 0.97"), TARGET_shakespeare ("0.25 0.28 0.30"): the
#              accuracies the times are read at (the first is drawn).
set -euo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
OUT=${OUT:-results/train}
mkdir -p "$OUT"
for task in ${@:-digits shakespeare}; do
  cfg=jobs/configs/train-adaptive-gns-$task.yaml
  base=${task%-16}
  clock=()
  if [ "$task" != "$base" ]; then
    np=16; small=${SMALL:-2}; large=${LARGE:-16}; top=32
    ${MPIEXEC1:-$MPIEXEC} -n 1 $PY -m hpcbench.train "$cfg" --policies '[]' --monitors '[]' --warmup 0 \
        --iterations 1 --batches_per_iter 1 --job_name "gns-$task-clock" --output "$OUT/gns-$task-clock.h5" --overwrite
    clock=(--step_clock.profile_batches '[]' --step_clock.profile_file "$OUT/gns-$task-clock.h5")
  else
    np=${NP:-2}; small=${SMALL:-16}; large=${LARGE:-128}; top=256
  fi
  $MPIEXEC -n "$np" $PY -m hpcbench.train "$cfg" "${clock[@]}" --output "$OUT/gns-$task-adaptive.h5" --overwrite
  if [ -n "${SCALE_LR:-}" ]; then
    $MPIEXEC -n "$np" $PY -m hpcbench.train "$cfg" "${clock[@]}" --job_name "gns-$task-adaptive-lr" \
        --policies "[{name: gns_batch, rule: ratio, start: $small, max_batch: $top, cycle_steps: 20, scale_lr: true}]" \
        --output "$OUT/gns-$task-adaptive-lr.h5" --overwrite
  fi
  for b in "$small" "$large"; do
    $MPIEXEC -n "$np" $PY -m hpcbench.train "$cfg" "${clock[@]}" --policies '[]' --monitors '[]' --batch_size "$b" \
        --job_name "gns-$task-fixed-$b" --output "$OUT/gns-$task-fixed-$b.h5" --overwrite
  done
  target_var=TARGET_$base
  default="0.90 0.95 0.97"; if [ "$base" = shakespeare ]; then default="0.25 0.28 0.30"; fi
  # shellcheck disable=SC2086  # the targets are words
  $PY analysis/plot_train_adaptive.py "$OUT"/gns-$task-adaptive*.h5 "$OUT"/gns-$task-fixed-*.h5 \
      --target ${!target_var:-$default} -o "$OUT/fig4-$task.png"
done
