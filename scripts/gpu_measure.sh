#!/bin/bash
# The GPU measurements of docs/gpu.md, in one run of under 5 minutes on one H100 or H200 (no network needed).
#
#   scripts/gpu_measure.sh                 # on the GPU host: phases 1-5, results and logs under $OUT
#   scripts/gpu_measure.sh emulate FILE    # on any CPU machine: figure 9 at 64 emulated workers replaying
#                                          # the GPU profile in FILE (phase 1's result file)
#
# Phases (each prints its numbers; everything is also in $OUT/*.h5 and $OUT/*.log). A phase that fails is
# reported (FAILED: phase N) and the next one runs, so that one lease on a GPU yields every phase that works:
#   0. provenance: the card, driver, CUDA, cuDNN, NCCL, and whether MPI is CUDA-aware
#   1. -np 1 ResNet-50 at 224x224, batch 64, KungFu's synthetic benchmark, --device cuda: img/s; its result
#      file holds the GPU compute profile (the `profile` table that profile_file: replays); then the plain
#      PyTorch loop on the same card, model and batch (scripts/gpu_bare_resnet.py: fp32 and AMP bf16)
#   2. -np 2, both ranks on the one GPU, global batch 64: host-staged ring and gloo DDP (nccl is listed and
#      skipped with NCCL's reason), img/s beside phase 1; then the GPU tests: every synchroniser that can run
#      gives the model of one process on the global batch (tests/mpi/test_gpu_sync.py, -np 1 and 2)
#   3. the GPU collectives sweep at -np 2 on the one GPU, 1 KiB to 256 MiB (nccl-tests' algbw, busbw, #wrong)
#   4. the pipeline: 2 stages on the one GPU against the unsplit model (loss and gradients, the GPU test of
#      tests/mpi/test_pipeline.py), and the iteration time of 2 stages beside 1
#
# Environment: PYTHON, MPIEXEC, OUT (results/gpu), DEVICE (cuda; "cpu" runs the same phases on a CPU machine to
# check the script), MODEL (resnet50), IMAGE (224), BATCH (64), MAXBYTES (256M), STEPS (iterations, 5),
# PIPE_HIDDEN (512), PIPE_SEQ (128): the pipeline's BERT-style layers (12 of them, 8 heads, batch 64 in 4 micro-batches),
# WHEELS (a folder of wheels to install first, offline: pydantic, PuLP, tqdm, ... that the GPU image lacks).
set -uo pipefail
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-mpiexec}
OUT=${OUT:-results/gpu}
DEVICE=${DEVICE:-cuda}
MODEL=${MODEL:-resnet50}
IMAGE=${IMAGE:-224}
BATCH=${BATCH:-64}
MAXBYTES=${MAXBYTES:-256M}
STEPS=${STEPS:-5}
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [ "${1:-}" = emulate ]; then
  # figure 9's settings (jobs/configs/train-fig9.yaml) at 64 workers over the modelled 10 Gbit/s link, the
  # compute replayed from the GPU profile instead of scaled to the V100 time (compute_time_s: null)
  PROFILE=${2:?usage: scripts/gpu_measure.sh emulate PROFILE.h5}
  NP=${NP:-64}
  $MPIEXEC -n "$NP" $PY -m hpcbench.train jobs/configs/train-fig9.yaml --model "$MODEL" --batch_size "$BATCH" \
      --compute_time_s null --profile_file "$PROFILE" --time_dilation "$((NP * 8))" --sync "${SYNC:-[ring, auto, sma]}" \
      --job_name "fig9-gpu-profile-p$NP" --output "$OUT/fig9-gpu-profile-p$NP.h5" --overwrite \
      | tee "$OUT/fig9-gpu-profile-p$NP.log"
  exit 0
fi

if [ -n "${WHEELS:-}" ]; then
  $PY -m pip install --no-index --find-links "$WHEELS" pydantic PuLP tqdm PyYAML psutil scikit-learn matplotlib
fi
start=$(date +%s)
phase() { echo; echo "== $1 ($(( $(date +%s) - start )) s)"; }
failed=()
want() { [[ " ${PHASES:-0 1 2 3 4} " == *" $1 "* ]]; }     # PHASES="1 2": run only those (the summary always)
check() { local rc=$?; if [ $rc -ne 0 ]; then echo "FAILED: phase $1 (exit $rc)"; failed+=("$1"); fi; }
TRAIN=(--model "$MODEL" --image_size "$IMAGE" --warmup 3 --iterations "$STEPS" --batches_per_iter 5
       --profile_steps 5 --progress false --device "$DEVICE" --overwrite)

if want 0; then
phase "0. the device"
$PY - <<'EOF' | tee "$OUT/provenance.log"
from mpi4py import MPI
from hpcbench.runtime.device import select_device
from hpcbench.runtime.gpuinfo import gpu_provenance
import os
for k, v in gpu_provenance(select_device(MPI.COMM_WORLD, os.environ.get("DEVICE", "cuda"))).items():
    print(f"{k:>24}: {v}")
EOF
check 0
fi

if want 1; then
phase "1. -np 1 $MODEL ${IMAGE}x${IMAGE} batch $BATCH, synthetic (KungFu), device $DEVICE"
$MPIEXEC -n 1 $PY -m hpcbench.train "${TRAIN[@]}" --batch_size "$BATCH" --sync "${NP1_SYNC:-[ring, nccl, ddp]}" \
    --job_name gpu-np1 --output "$OUT/np1.h5" | tee "$OUT/np1.log"; check 1
$PY scripts/gpu_bare_resnet.py --model "$MODEL" --image-size "$IMAGE" --batch "$BATCH" --device "$DEVICE" \
    --steps "$((STEPS * 5))" | tee "$OUT/bare.log"; check 1b
fi

if want 2; then
phase "2. -np 2 on one device, global batch $BATCH: host-staged ring, gloo DDP, nccl"
$MPIEXEC -n 2 $PY -m hpcbench.train "${TRAIN[@]}" --batch_size "$((BATCH / 2))" --sync '[ring, ddp, nccl]' --host_staging true \
    --job_name gpu-np2 --output "$OUT/np2.h5" | tee "$OUT/np2.log"; check 2
for n in 1 2; do
  $MPIEXEC -n "$n" $PY -m pytest -q -p no:cacheprovider -rs tests/mpi/test_gpu_sync.py 2>&1 \
      | tee "$OUT/test-gpu-sync-np$n.log" | tail -6; check "2-tests-np$n"
done
fi

if want 3; then
phase "3. collectives on device buffers, -np 2, 1K..$MAXBYTES"
ALGS=mpi,ring,auto,rabenseifner,gloo
if [ "$DEVICE" != cpu ]; then ALGS=$ALGS,nccl,mpi_direct; fi      # device-memory baselines (skipped with a reason)
$MPIEXEC -n 2 $PY -m hpcbench.bench.collectives --device "$DEVICE" -b 1K -e "$MAXBYTES" -f 4 -n 20 -a "$ALGS" --output "$OUT/collectives.h5" --overwrite \
    | tee "$OUT/collectives.log"; check 3
fi

if want 4; then
phase "4. pipeline: 2 stages on one device against the unsplit model"
$MPIEXEC -n 2 $PY -m pytest -q -p no:cacheprovider -rs tests/mpi/test_pipeline.py -k "gpu or unsplit" 2>&1 \
    | tee "$OUT/test-pipeline-np2.log" | tail -6; check 4-tests
for n in 1 2; do
  $MPIEXEC -n "$n" $PY -m hpcbench.pipeline --device "$DEVICE" --allocators '[even]' --model.layers 12 \
      --model.hidden "${PIPE_HIDDEN:-512}" --model.heads 8 --model.seq_len "${PIPE_SEQ:-128}" --batch_size 64 \
      --micro_batches 4 --iterations 5 --job_name "gpu-pipeline-np$n" --output "$OUT/pipeline-np$n.h5" --overwrite | tee "$OUT/pipeline-np$n.log"; check "4-np$n"
done
fi

phase "5. summary"
$PY - "$OUT" <<'EOF'
import os
import sys
from hpcbench.results import read_attrs, read_table
out = sys.argv[1]


def part(name, fn):
    try:
        fn()
    except Exception as exc:  # a phase that failed left no file: say so and go on
        print(f"{name}: not available ({type(exc).__name__}: {exc})")


def one():
    a = read_attrs(f"{out}/np1.h5")
    card = a["gpu_model"] or "cpu"
    print(f"card: {card}; driver {a['gpu_driver']}, CUDA {a['cuda_version']}, cuDNN {a['cudnn_version']}, "
          f"NCCL {a['nccl_version']}, precision {a['gpu_precision']}, CUDA-aware MPI: {a['cuda_aware_mpi']} "
          f"({a['cuda_aware_mpi_evidence']})")
    print(f"np1 {a['model']} profile: forward {a['forward_s'] * 1e3:.1f} ms, backward {a['backward_s'] * 1e3:.1f} ms, "
          f"optimizer {a['optimizer_s'] * 1e3:.1f} ms on {a['profile_device']}")
    t = read_table(f"{out}/np1.h5", "summary")
    for s, st, v in zip(t["sync"], t["status"], t["img_per_s_total"]):
        print(f"np1 {s:>6}: {v:8.1f} img/s  {st}")


def bare():
    with open(f"{out}/bare.log") as f:
        for line in f:
            if line.startswith("bare "):
                print(line.rstrip())


def two():
    one = read_table(f"{out}/np1.h5", "summary")
    base = dict(zip(one["sync"], one["img_per_s_total"]))["ring"]
    t = read_table(f"{out}/np2.h5", "summary")
    for s, st, v in zip(t["sync"], t["status"], t["img_per_s_total"]):
        print(f"np2 {s:>6}: {v:8.1f} img/s total ({v / base:.2f} x np1 ring)  {st}")


def pipe():
    for n in (1, 2):
        t = read_table(f"{out}/pipeline-np{n}.h5", "allocations")
        print(f"pipeline {n} stage(s): {t['measured_iteration_s'][0] * 1e3:.1f} ms per iteration")


for name, fn in (("np1", one), ("bare", bare), ("np2", two), ("pipeline", pipe)):
    part(name, fn)
for log in sorted(os.listdir(out)):
    if log.startswith("test-") and log.endswith(".log"):
        with open(f"{out}/{log}") as f:
            tail = [x.rstrip() for x in f if x.strip()][-1:]
        print(f"{log}: {tail[0] if tail else '(empty)'}")
EOF
echo "elapsed $(( $(date +%s) - start )) s; failed phases: ${failed[*]:-none}"
echo "emulate figure 9 from the profile on a CPU machine with:  scripts/gpu_measure.sh emulate $OUT/np1.h5"
[ ${#failed[@]} -eq 0 ]
