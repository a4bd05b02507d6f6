#!/bin/bash
# The GPU measurements of docs/gpu.md, in one run of under 5 minutes on one H100 or H200 (no network needed).
#
#   scripts/gpu_measure.sh                 # on the GPU host: phases 1-5, results and logs under $OUT
#   scripts/gpu_measure.sh emulate FILE    # on any CPU machine: figure 9 at 64 emulated workers replaying
#                                          # the GPU profile in FILE (phase 1's result file)
#
# Phases (each prints its numbers; every printed figure is also in a file under $OUT: the runs' *.h5, the plain
# loop's bare-rK.json with every timed step, the tests' test-*.xml (JUnit: pass, skip and fail counts), and
# $OUT/summary.json, what the summary prints, with the provenance: commit, host, CPU, cores, load, command,
# date). A phase that fails is
# reported (FAILED: phase N) and the next one runs, so that one lease on a GPU yields every phase that works:
#   0. provenance: the card, driver, CUDA, cuDNN, NCCL, and whether MPI is CUDA-aware
#   1. -np 1 ResNet-50 at 224x224, batch 64, KungFu's synthetic benchmark, --device cuda: img/s; its result
#      file holds the GPU compute profile (the `profile` table that profile_file: replays); then the plain
#      PyTorch loop on the same card, model and batch (scripts/gpu_bare_resnet.py: fp32 and AMP bf16);
#      REPEATS times (np1-rK.h5, bare-rK.json; default 1)
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
# WHEELS (a folder of wheels to install first, offline: pydantic, PuLP, tqdm, ... that the GPU image lacks),
# REPEATS (phase 1's runs, 1).
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
REPEATS=${REPEATS:-1}
COMMAND="DEVICE=$DEVICE MODEL=$MODEL IMAGE=$IMAGE BATCH=$BATCH STEPS=$STEPS REPEATS=$REPEATS PHASES=\"${PHASES:-0 1 2 3 4}\" scripts/gpu_measure.sh $*"
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
for k in $(seq 1 "$REPEATS"); do
  $MPIEXEC -n 1 $PY -m hpcbench.train "${TRAIN[@]}" --batch_size "$BATCH" --sync "${NP1_SYNC:-[ring, nccl, ddp]}" \
      --job_name "gpu-np1-r$k" --output "$OUT/np1-r$k.h5" | tee "$OUT/np1-r$k.log"; check "1-r$k"
  $PY scripts/gpu_bare_resnet.py --model "$MODEL" --image-size "$IMAGE" --batch "$BATCH" --device "$DEVICE" \
      --steps "$((STEPS * 5))" --json "$OUT/bare-r$k.json" | tee "$OUT/bare-r$k.log"; check "1b-r$k"
done
fi

if want 2; then
phase "2. -np 2 on one device, global batch $BATCH: host-staged ring, gloo DDP, nccl"
$MPIEXEC -n 2 $PY -m hpcbench.train "${TRAIN[@]}" --batch_size "$((BATCH / 2))" --sync '[ring, ddp, nccl]' --host_staging true \
    --job_name gpu-np2 --output "$OUT/np2.h5" | tee "$OUT/np2.log"; check 2
for n in 1 2; do
  $MPIEXEC -n "$n" $PY -m pytest -q -p no:cacheprovider -rs tests/mpi/test_gpu_sync.py \
      --junitxml "$OUT/test-gpu-sync-np$n.xml" 2>&1 | tee "$OUT/test-gpu-sync-np$n.log" | tail -6; check "2-tests-np$n"
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
$MPIEXEC -n 2 $PY -m pytest -q -p no:cacheprovider -rs tests/mpi/test_pipeline.py -k "gpu or unsplit" \
    --junitxml "$OUT/test-pipeline-np2.xml" 2>&1 | tee "$OUT/test-pipeline-np2.log" | tail -6; check 4-tests
for n in 1 2; do
  $MPIEXEC -n "$n" $PY -m hpcbench.pipeline --device "$DEVICE" --allocators '[even]' --model.layers 12 \
      --model.hidden "${PIPE_HIDDEN:-512}" --model.heads 8 --model.seq_len "${PIPE_SEQ:-128}" --batch_size 64 \
      --micro_batches 4 --iterations 5 --job_name "gpu-pipeline-np$n" --output "$OUT/pipeline-np$n.h5" --overwrite | tee "$OUT/pipeline-np$n.log"; check "4-np$n"
done
fi

phase "5. summary"
COMMAND="$COMMAND" $PY - "$OUT" <<'EOF'
import glob
import json
import math
import os
import platform
import sys
import xml.etree.ElementTree as ET

from hpcbench.reproduce.machine import describe_machine
from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.provenance import git_commit, utc_now

out = sys.argv[1]
machine = describe_machine()
kept = {"provenance": {"commit": git_commit(), "host": platform.node(), "cpu": machine["cpu"],
                       "cores": machine["logical_cores"], "load": machine["load_average"],
                       "command": os.environ.get("COMMAND", "scripts/gpu_measure.sh"), "date": utc_now(),
                       "timing": True, "versions": machine["versions"]},
        "np1": [], "bare": [], "np2": [], "pipeline": [], "tests": {}, "unavailable": {}}


def number(v):
    v = float(v)
    return v if math.isfinite(v) else None


def part(name, fn):
    try:
        fn()
    except Exception as exc:  # a phase that failed left no file: say so and go on
        print(f"{name}: not available ({type(exc).__name__}: {exc})")
        kept["unavailable"][name] = f"{type(exc).__name__}: {exc}"


def runs(prefix):
    found = sorted(glob.glob(f"{out}/{prefix}-r*.h5"))
    if not found:
        raise FileNotFoundError(f"no {out}/{prefix}-r*.h5")
    return found


def one():
    for path in runs("np1"):
        a = read_attrs(path)
        card = a["gpu_model"] or "cpu"
        name = os.path.basename(path)
        print(f"{name} card: {card}; driver {a['gpu_driver']}, CUDA {a['cuda_version']}, cuDNN {a['cudnn_version']}, "
              f"NCCL {a['nccl_version']}, precision {a['gpu_precision']}, CUDA-aware MPI: {a['cuda_aware_mpi']} "
              f"({a['cuda_aware_mpi_evidence']})")
        print(f"{name} {a['model']} profile: forward {a['forward_s'] * 1e3:.1f} ms, backward "
              f"{a['backward_s'] * 1e3:.1f} ms, optimizer {a['optimizer_s'] * 1e3:.1f} ms on {a['profile_device']}")
        t = read_table(path, "summary")
        rows = []
        for s, st, v in zip(t["sync"], t["status"], t["img_per_s_total"]):
            print(f"{name} {s:>6}: {v:8.1f} img/s  {st}")
            rows.append({"sync": str(s), "status": str(st), "img_per_s_total": number(v)})
        kept["np1"].append({"file": name, "card": str(card), "git_commit": str(a["git_commit"]),
                            "start_time": str(a["start_time"]), "forward_s": number(a["forward_s"]),
                            "backward_s": number(a["backward_s"]), "optimizer_s": number(a["optimizer_s"]),
                            "summary": rows})


def bare():
    found = sorted(glob.glob(f"{out}/bare-r*.json"))
    if not found:
        raise FileNotFoundError(f"no {out}/bare-r*.json")
    for path in found:
        with open(path) as f:
            data = json.load(f)
        for prec, v in data["precisions"].items():
            print(f"{os.path.basename(path)} {prec:>9}: {v['img_per_s']:8.1f} img/s  (median "
                  f"{v['median_step_s'] * 1e3:.2f} ms per step)")
        kept["bare"].append({"file": os.path.basename(path), **data})


def two():
    first = read_table(runs("np1")[0], "summary")
    base = dict(zip(first["sync"], first["img_per_s_total"]))["ring"]
    t = read_table(f"{out}/np2.h5", "summary")
    for s, st, v in zip(t["sync"], t["status"], t["img_per_s_total"]):
        print(f"np2 {s:>6}: {v:8.1f} img/s total ({v / base:.2f} x np1 ring)  {st}")
        kept["np2"].append({"sync": str(s), "status": str(st), "img_per_s_total": number(v),
                            "vs_np1_ring": number(v / base)})


def pipe():
    for n in (1, 2):
        t = read_table(f"{out}/pipeline-np{n}.h5", "allocations")
        ms = t["measured_iteration_s"][0] * 1e3
        print(f"pipeline {n} stage(s): {ms:.1f} ms per iteration")
        kept["pipeline"].append({"stages": n, "measured_iteration_s": number(t["measured_iteration_s"][0])})


for name, fn in (("np1", one), ("bare", bare), ("np2", two), ("pipeline", pipe)):
    part(name, fn)
for xml in sorted(glob.glob(f"{out}/test-*.xml")):
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in ET.parse(xml).getroot().iter("testsuite"):
        for k in counts:
            counts[k] += int(suite.get(k, 0))
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    kept["tests"][os.path.basename(xml)] = counts
    print(f"{os.path.basename(xml)}: {counts['passed']} passed, {counts['skipped']} skipped, "
          f"{counts['failures'] + counts['errors']} failed")
with open(f"{out}/summary.json.tmp", "w") as f:
    json.dump(kept, f, indent=1)
os.replace(f"{out}/summary.json.tmp", f"{out}/summary.json")
print(f"every figure above: {out}/summary.json (commit {kept['provenance']['commit'] or 'unknown'})")
EOF
echo "elapsed $(( $(date +%s) - start )) s; failed phases: ${failed[*]:-none}"
echo "emulate figure 9 from the profile on a CPU machine with:  scripts/gpu_measure.sh emulate $OUT/np1-r1.h5"
[ ${#failed[@]} -eq 0 ]
