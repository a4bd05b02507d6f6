#!/bin/bash
# Is emulated compute sound? At -np 2 (fits the cores): a real run, an emulated run at the real run's
# measured compute time, the same dilated 10x (throughputs within 5 % of the real run's), and
# emulated runs without overlap, undilated and dilated, whose communication per step is compared
# with the alpha-beta model (within 15 %). All over a modelled 1 Gbit/s link.
# Usage (repository root):  scripts/train_soundness.sh          (PYTHON, MPIEXEC, OUT as train_figures.sh)
set -euo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
OUT=${OUT:-results/train}
mkdir -p "$OUT"
common=(--model resnet18 --image_size 32 --batch_size 16 --warmup 2 --iterations 4 --batches_per_iter 3
        --sync '[ring, sma]' --link.kind model --link.bandwidth 1Gbit --link.latency_s 0.00005
        --progress false --overwrite)
$MPIEXEC -n 2 $PY -m hpcbench.train "${common[@]}" --output "$OUT/sound-real.h5"
ct=$($PY -c "import sys; sys.path.insert(0, '.'); from hpcbench.results import read_table
s = read_table('$OUT/sound-real.h5', 'summary'); print(float(s['compute_s'][0]))")
echo "real run's compute per step: $ct s"
for d in 1 10; do
  $MPIEXEC -n 2 $PY -m hpcbench.train "${common[@]}" --compute emulated --compute_time_s "$ct" --time_dilation $d \
      --output "$OUT/sound-emul-d$d.h5"
  $MPIEXEC -n 2 $PY -m hpcbench.train "${common[@]}" --compute emulated --compute_time_s "$ct" --time_dilation $d \
      --overlap false --output "$OUT/sound-nooverlap-d$d.h5"
done
$PY analysis/train_soundness.py "$OUT"/sound-real.h5 "$OUT"/sound-emul-d1.h5 "$OUT"/sound-emul-d10.h5 \
    "$OUT"/sound-nooverlap-d1.h5 "$OUT"/sound-nooverlap-d10.h5
