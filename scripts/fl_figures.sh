#!/bin/bash
# Runs behind the federated strategy figures (analysis/fl_compare.py), each for several seeds with
# the real device, bandwidth and availability traces and one evaluation per round:
#   digits (the default job, jobs/configs/digits.yaml: 1,000 registered clients, ~100 online, 13
#   selected per round):
#     - random vs Oort selection (FedAvg; Oort's keys in jobs/configs/digits-1k.yaml);
#     - FedAvg vs each server optimizer at its defaults (random selection; the FedOpt family also
#       at Flower's eta 1e-2, tau 1e-3, no bias correction) vs FedBuff (digits-fedbuff.yaml);
#     - FedBuff vs synchronous FedAvg at the same concurrency (13 clients in flight), both with
#       their server step tuned on seed 4 (sync server_learning_rate 2; FedBuff K 5, eta_g 2) and
#       both untuned (sync server_learning_rate 1; FedBuff K 10, eta_g 1);
#   Shakespeare (jobs/configs/shakespeare.yaml: 250 roles, 14-22 online, 7 selected per round):
#     - random vs Oort selection; FedAvg vs each server optimizer vs FedBuff (FedBuff's defaults:
#       7 in flight, K 5, eta_g 1).
# Then draws the time-to-accuracy figures and prints the mean virtual time to the target per
# strategy, per seed, and the ratio to the baseline. PARTS picks the parts ("digits shakespeare").
# Usage (repository root):  scripts/fl_figures.sh   env: SEEDS="1 2 3" NP=2 OUT=results/fl PARTS=...
set -euo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-2}
OUT=${OUT:-results/fl}
SEEDS=${SEEDS:-1 2 3}
PARTS=${PARTS:-digits shakespeare}
run() {  # run DIR/NAME CONFIG ARGS...: one job into $OUT/DIR/NAME.h5, one evaluation per round
  local name=$1 config=$2
  shift 2
  mkdir -p "$(dirname "$OUT/$name")"
  $MPIEXEC -n "$NP" $PY -m hpcbench.fl "$config" --job_name "$(basename "$name")" --progress false \
      --overwrite --eval_interval 1 --output "$OUT/$name.h5" "$@"
}
compare() {  # compare FIGURE ARGS...: analysis/fl_compare.py into $OUT/FIGURE.png
  local figure=$1
  shift
  echo "== $figure"
  $PY analysis/fl_compare.py "$@" -o "$OUT/$figure.png"
}
strategies() {  # strategies DATASET LABEL: random vs Oort, and FedAvg vs server optimizers vs FedBuff
  local d=$OUT/$1
  compare "$1-selection" "$d"/fedavg-s*.h5 "$d"/oort-s*.h5 --by selection --title "$2: random vs Oort"
  compare "$1-aggregators" "$d"/fedavg-s*.h5 "$d"/opt-*.h5 "$d"/fedbuff-s*.h5 --by aggregator \
      --title "$2: server optimizers and FedBuff"
}
for part in $PARTS; do
  case $part in
    digits)
      for seed in $SEEDS; do
        run digits/fedavg-s$seed jobs/configs/digits.yaml --seed "$seed"
        run digits/oort-s$seed jobs/configs/digits-1k.yaml --seed "$seed"
        for agg in fedprox fedyogi fedadam fedadagrad qfedavg; do
          run digits/opt-$agg-s$seed jobs/configs/digits.yaml --seed "$seed" --aggregator "$agg"
        done
        for agg in fedyogi fedadam fedadagrad; do
          run digits/flower-$agg-s$seed jobs/configs/digits.yaml --seed "$seed" --aggregator "$agg" \
              --aggregator.eta 0.01 --aggregator.tau 0.001 --aggregator.bias_correction false
        done
        run digits/fedavg-eta2-s$seed jobs/configs/digits.yaml --seed "$seed" --aggregator.server_learning_rate 2
        run digits/fedbuff-s$seed jobs/configs/digits-fedbuff.yaml --seed "$seed"
        run digits/fedbuff-k10-eta1-s$seed jobs/configs/digits-fedbuff.yaml --seed "$seed" \
            --asynchronous.buffer_size 10 --aggregator.server_learning_rate 1
      done
      strategies digits "digits, 1,000 clients"
      D=$OUT/digits
      compare digits-aggregators-flower "$D"/fedavg-s*.h5 "$D"/flower-*.h5 --by aggregator \
          --title "digits, 1,000 clients: FedOpt at Flower's defaults"
      compare digits-fedbuff-tuned "$D"/fedavg-eta2-s*.h5 "$D"/fedbuff-s*.h5 --by job \
          --title "digits, 13 in flight: FedBuff vs sync FedAvg, both tuned on seed 4"
      compare digits-fedbuff-untuned "$D"/fedavg-s*.h5 "$D"/fedbuff-k10-eta1-s*.h5 --by job \
          --title "digits, 13 in flight: FedBuff (K 10, eta_g 1) vs sync FedAvg (eta_s 1)"
      ;;
    shakespeare)
      for seed in $SEEDS; do
        run shakespeare/fedavg-s$seed jobs/configs/shakespeare.yaml --seed "$seed"
        run shakespeare/oort-s$seed jobs/configs/shakespeare.yaml --seed "$seed" --selection oort
        for agg in fedprox fedyogi fedadam fedadagrad qfedavg; do
          run shakespeare/opt-$agg-s$seed jobs/configs/shakespeare.yaml --seed "$seed" --aggregator "$agg"
        done
        run shakespeare/fedbuff-s$seed jobs/configs/shakespeare.yaml --seed "$seed" --mode async
      done
      strategies shakespeare "Shakespeare"
      ;;
    *)
      echo "fl_figures.sh: unknown part '$part' in PARTS (digits, shakespeare)" >&2
      exit 2
      ;;
  esac
done
