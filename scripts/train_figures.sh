#!/bin/bash
# Runs behind the training figures: figure 9 (analysis/plot_train_scaling.py: ResNet-50 and
# MobileNetV2 gradients, emulated V100-class compute, modelled 10 and 1 Gbit/s links, np = 1..64,
# every synchroniser of jobs/configs/train-fig9.yaml) and figure 8 (analysis/plot_train_monitors.py:
# GNS and variance monitors against none, interleaved, at -np 2 with real compute).
# Usage (repository root):  scripts/train_figures.sh [NP...]        (default: 1 2 4 8 16 32 64)
# Environment: PYTHON, MPIEXEC, OUT (results/train), SYNC (override the synchroniser list, e.g. '[ring, sma]'),
#              MODELS (default "resnet50 mobilenet_v2"), LINKS (default "10Gbit 1Gbit"),
#              PRIORITY_SYNC (synchronisers of the schedule: priority runs, default '[ring, rabenseifner]').
set -euo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
OUT=${OUT:-results/train}
mkdir -p "$OUT"
extra=()
if [ -n "${SYNC:-}" ]; then extra+=(--sync "$SYNC"); fi
for model in ${MODELS:-resnet50 mobilenet_v2}; do
  ct=0.174; if [ "$model" = mobilenet_v2 ]; then ct=0.013; fi    # see docs/train.md (V100-class compute)
  for link in ${LINKS:-10Gbit 1Gbit}; do
    for p in ${@:-1 2 4 8 16 32 64}; do
      # keep the CPU's copies and the scheduling of p ranks on few cores small against modelled time: at
      # p = 64 a dilation of 128 left the ring CPU-bound (comm 178 ms/step against the model's 166), 512 did not
      dil=20; if [ "$p" -ge 16 ]; then dil=$((p * 4)); fi; if [ "$p" -ge 64 ]; then dil=$((p * 8)); fi
      $MPIEXEC -n "$p" $PY -m hpcbench.train jobs/configs/train-fig9.yaml --model "$model" --compute_time_s "$ct" \
          --link.bandwidth "$link" --time_dilation "$dil" --job_name "fig9-$model-$link" "${extra[@]}" \
          --output "$OUT/fig9-$model-$link-p$p.h5" --overwrite
      # the priority schedule (ByteScheduler across the barrier) of the schedulable synchronisers, 4 MiB buckets
      $MPIEXEC -n "$p" $PY -m hpcbench.train jobs/configs/train-fig9.yaml --model "$model" --compute_time_s "$ct" \
          --link.bandwidth "$link" --time_dilation "$dil" --job_name "fig9-$model-$link-priority" \
          --sync "${PRIORITY_SYNC:-[ring, rabenseifner]}" --schedule priority --bucket_mb 4 \
          --output "$OUT/fig9-$model-$link-p$p-priority.h5" --overwrite
    done
  done
done
$PY analysis/plot_train_scaling.py "$OUT"/fig9-*.h5 -o "$OUT/train-fig9.png"
$MPIEXEC -n 2 $PY -m hpcbench.train jobs/configs/train-fig8.yaml --output "$OUT/fig8.h5" --overwrite
$PY analysis/plot_train_monitors.py "$OUT/fig8.h5" -o "$OUT/train-fig8.png"
