#!/bin/bash
# Runs behind the federated strategy figures (analysis/fl_compare.py): the 1,000-client digits job
# (jobs/configs/digits-1k.yaml, real device, bandwidth and availability traces) with random vs Oort
# selection (FedAvg), and FedAvg vs each server optimizer at its defaults (random selection; the
# FedOpt family also at Flower's eta 1e-2, tau 1e-3, no bias correction), for several seeds; then
# the time-to-accuracy figures and the mean virtual time to the target.
# With SHAKESPEARE=1 also random vs Oort on jobs/configs/shakespeare.yaml (slow on a laptop).
# Usage (repository root):  scripts/fl_figures.sh      env: SEEDS="1 2 3" NP=2 OUT=results/fl
set -euo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-2}
OUT=${OUT:-results/fl}
SEEDS=${SEEDS:-1 2 3}
mkdir -p "$OUT"
run() {  # run NAME CONFIG ARGS...: one job into $OUT/NAME.h5
  local name=$1 config=$2
  shift 2
  $MPIEXEC -n "$NP" $PY -m hpcbench.fl "$config" --job_name "$name" --progress false --overwrite \
      --output "$OUT/$name.h5" "$@"
}
for seed in $SEEDS; do
  for sel in random oort; do
    run "select-$sel-s$seed" jobs/configs/digits-1k.yaml --seed "$seed" --selection "$sel"
  done
  for agg in fedavg fedprox fedyogi fedadam fedadagrad qfedavg; do
    run "opt-$agg-s$seed" jobs/configs/digits-1k.yaml --seed "$seed" --selection random --aggregator "$agg"
  done
  for agg in fedyogi fedadam fedadagrad; do
    run "flower-$agg-s$seed" jobs/configs/digits-1k.yaml --seed "$seed" --selection random --aggregator "$agg" \
        --aggregator.eta 0.01 --aggregator.tau 0.001 --aggregator.bias_correction false
  done
  if [ "${SHAKESPEARE:-0}" = 1 ]; then
    for sel in random oort; do
      run "shakespeare-$sel-s$seed" jobs/configs/shakespeare.yaml --seed "$seed" --selection "$sel" \
          --eval_interval 1
    done
  fi
done
$PY analysis/fl_compare.py "$OUT"/select-*.h5 --by selection -o "$OUT/selection.png" \
    --title "digits, 1,000 clients: random vs Oort"
$PY analysis/fl_compare.py "$OUT"/opt-*.h5 --by aggregator -o "$OUT/aggregators.png" \
    --title "digits, 1,000 clients: server optimizers"
$PY analysis/fl_compare.py "$OUT"/opt-fedavg-*.h5 "$OUT"/flower-*.h5 --by aggregator -o "$OUT/aggregators-flower.png" \
    --title "digits, 1,000 clients: FedOpt at Flower's defaults"
if [ "${SHAKESPEARE:-0}" = 1 ]; then
  $PY analysis/fl_compare.py "$OUT"/shakespeare-*.h5 --by selection -o "$OUT/shakespeare-selection.png" \
      --title "Shakespeare: random vs Oort"
fi
