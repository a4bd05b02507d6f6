#!/usr/bin/env bash
# Build and install Horovod (PyTorch + MPI, CPU only) into the active Python
# environment, from the PyPI sdist, with the C++17 fix needed for torch 2.x.
# See docs/horovod.md for the background and the run-time environment.
set -euo pipefail

HVD_VERSION="${HOROVOD_VERSION:-0.28.1}"
PY="${PYTHON:-python}"
FORCE=0
VERIFY=1
JOBS="${HOROVOD_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
NP_VERIFY=2
VERIFY_TIMEOUT="${HOROVOD_VERIFY_TIMEOUT:-180}"

usage() {
    cat <<EOF
Usage: $(basename "$0") [-h] [-f] [-n] [-j JOBS]

Build Horovod ${HVD_VERSION} from the PyPI sdist (patched to C++17 so it builds
against torch 2.x) with PyTorch + MPI support and install it into the Python
environment of \$PYTHON (default: 'python' on PATH), against the torch and the
MPI installed there (e.g. the PyPI 'mpich' wheel). Then verify it:
'import horovod.torch' and a ${NP_VERIFY}-rank mpiexec allreduce.

The built wheel is cached, keyed by horovod/torch/python version and MPI
library, so a second run (e.g. in a fresh venv at the same path) only installs.
If horovod.torch ${HVD_VERSION} with MPI already imports, nothing is built.

Options:
  -h        show this help and exit
  -f        force: rebuild the wheel even if installed or cached
  -n        skip the final verification (import + mpiexec allreduce)
  -j JOBS   parallel compile jobs (default: nproc = ${JOBS})

Environment:
  PYTHON                 python of the target environment (default: python)
  HPCBENCH_WHEEL_CACHE   wheel cache dir
                         (default: \${XDG_CACHE_HOME:-\$HOME/.cache}/hpcbench/wheels)
  MPICC                  MPI C compiler wrapper to build against (default:
                         <env prefix>/bin/mpicc if present, else mpicc on PATH)
  HOROVOD_VERSION        horovod version (default 0.28.1; the patch targets it)
  HOROVOD_BUILD_JOBS     same as -j
  HOROVOD_VERIFY_TIMEOUT seconds allowed for the mpiexec check (default 180)
  HPCBENCH_KEEP_BUILD=1  keep the temporary build directory

Exit status: 0 on success, non-zero (with a message) on any failure.
EOF
}

log()  { printf '[build_horovod] %s\n' "$*" >&2; }
die()  { printf '[build_horovod] ERROR: %s\n' "$*" >&2; exit 1; }

while getopts ":hfnj:" opt; do
    case "$opt" in
        h) usage; exit 0 ;;
        f) FORCE=1 ;;
        n) VERIFY=0 ;;
        j) JOBS="$OPTARG" ;;
        :) die "option -$OPTARG needs an argument (see -h)" ;;
        *) die "unknown option -$OPTARG (see -h)" ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -eq 0 ]] || die "unexpected arguments: $* (see -h)"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "-j needs a positive integer, got '$JOBS'"

# --------------------------------------------------------------------------
# Target Python environment
# --------------------------------------------------------------------------
command -v "$PY" >/dev/null 2>&1 || die "python '$PY' not found (set PYTHON or activate the venv)"
PY="$(command -v "$PY")"
PY_PREFIX="$("$PY" -c 'import sys; print(sys.prefix)')"
PY_VER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
TORCH_INFO="$("$PY" -c 'import os, torch; print(torch.__version__); print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)" \
    || die "torch is not importable with $PY; install torch first"
TORCH_VER="$(sed -n 1p <<<"$TORCH_INFO")"
TORCH_LIB="$(sed -n 2p <<<"$TORCH_INFO")"
# Tools installed into the env (mpicc, mpiexec, cmake from pip) must win.
export PATH="$PY_PREFIX/bin:$PATH"
log "python: $PY (Python $PY_VER, prefix $PY_PREFIX)"
log "torch:  $TORCH_VER"

pip_() { "$PY" -m pip --disable-pip-version-check "$@"; }

# --------------------------------------------------------------------------
# MPI of the environment
# --------------------------------------------------------------------------
if [[ -n "${MPICC:-}" ]]; then
    MPICC_BIN="$(command -v "$MPICC")" || die "MPICC=$MPICC not found"
elif [[ -x "$PY_PREFIX/bin/mpicc" ]]; then
    MPICC_BIN="$PY_PREFIX/bin/mpicc"
else
    MPICC_BIN="$(command -v mpicc)" \
        || die "no mpicc found in $PY_PREFIX/bin or on PATH; install MPI (e.g. 'pip install mpich') or set MPICC"
fi
MPI_BIN="$(cd "$(dirname "$(readlink -f "$MPICC_BIN")")" && pwd)"
export MPI_HOME="$(dirname "$MPI_BIN")"
for tool in mpicxx mpiexec; do
    [[ -x "$MPI_BIN/$tool" ]] || die "$MPI_BIN/$tool missing (needed next to $MPICC_BIN)"
done
MPIEXEC="$MPI_BIN/mpiexec"
export PATH="$MPI_BIN:$PATH"   # CMake's FindMPI looks for mpicxx/mpicc on PATH
export MPICC="$MPI_BIN/mpicc" MPICXX="$MPI_BIN/mpicxx"
[[ -f "$MPI_HOME/include/mpi.h" ]] || die "no mpi.h under $MPI_HOME/include"

if [[ -x "$MPI_BIN/mpichversion" ]]; then
    MPI_ID="mpich-$("$MPI_BIN/mpichversion" | sed -n 's/^MPICH Version:[[:space:]]*//p' | head -n1)"
elif [[ -x "$MPI_BIN/ompi_info" ]]; then
    MPI_ID="openmpi-$("$MPI_BIN/ompi_info" --parsable --version 2>/dev/null | sed -n 's/^ompi:version:full://p' | head -n1)"
else
    MPI_ID="$("$MPIEXEC" --version 2>&1 | head -n1)"
fi
# The built library has an absolute RUNPATH to the MPI and torch lib dirs,
# so those locations are part of the key too.
MPI_HASH="$(printf '%s\n%s' "$MPI_HOME" "$TORCH_LIB" | sha256sum | cut -c1-8)"
log "MPI:    $MPI_ID at $MPI_HOME (mpicc: $MPICC)"

# --------------------------------------------------------------------------
# Verification helpers
# --------------------------------------------------------------------------
IMPORT_CHECK="
import horovod, horovod.torch as hvd
assert horovod.__version__ == '$HVD_VERSION', 'horovod version %s != $HVD_VERSION' % horovod.__version__
assert hvd.mpi_built(), 'horovod.torch was built without MPI'
print('horovod %s: mpi_built=%s gloo_built=%s nccl_built=%s' % (horovod.__version__, hvd.mpi_built(), hvd.gloo_built(), hvd.nccl_built()))
"

ALLREDUCE_CHECK='
import torch, horovod.torch as hvd
hvd.init()
r, n = hvd.rank(), hvd.size()
assert n == int("'"$NP_VERIFY"'"), "expected %s ranks, got %d" % ("'"$NP_VERIFY"'", n)
x = torch.full((1024,), float(r + 1))
s = hvd.allreduce(x, op=hvd.Sum, name="verify_sum")
a = hvd.allreduce(x, op=hvd.Average, name="verify_avg")
exp_sum = n * (n + 1) / 2.0
assert torch.allclose(s, torch.full_like(s, exp_sum)), "rank %d: sum %s != %s" % (r, s[0].item(), exp_sum)
assert torch.allclose(a, torch.full_like(a, exp_sum / n)), "rank %d: avg %s != %s" % (r, a[0].item(), exp_sum / n)
g = hvd.allgather(torch.tensor([r]))
assert g.tolist() == list(range(n)), "rank %d: allgather %s" % (r, g.tolist())
hvd.shutdown()
print("rank %d/%d: allreduce sum=%g avg=%g OK" % (r, n, s[0].item(), a[0].item()), flush=True)
'

import_ok() { "$PY" -c "$IMPORT_CHECK" >/dev/null 2>&1; }

verify() {
    log "verify: import horovod.torch"
    "$PY" -c "$IMPORT_CHECK" || die "verification failed: 'import horovod.torch' (see error above)"
    log "verify: $NP_VERIFY-rank allreduce with $MPIEXEC (timeout ${VERIFY_TIMEOUT}s)"
    local rc=0
    timeout "$VERIFY_TIMEOUT" "$MPIEXEC" -n "$NP_VERIFY" "$PY" -c "$ALLREDUCE_CHECK" || rc=$?
    if [[ $rc -eq 124 ]]; then
        die "verification failed: mpiexec allreduce timed out after ${VERIFY_TIMEOUT}s"
    elif [[ $rc -ne 0 ]]; then
        die "verification failed: mpiexec -n $NP_VERIFY allreduce exited with $rc"
    fi
    log "verify: OK"
}

# --------------------------------------------------------------------------
# Already installed?
# --------------------------------------------------------------------------
if [[ $FORCE -eq 0 ]] && import_ok; then
    log "horovod $HVD_VERSION with horovod.torch (MPI) is already installed in $PY_PREFIX; nothing to build"
    [[ $VERIFY -eq 1 ]] && verify
    exit 0
fi

# --------------------------------------------------------------------------
# Wheel cache
# --------------------------------------------------------------------------
CACHE_ROOT="${HPCBENCH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hpcbench/wheels}"
KEY="horovod-${HVD_VERSION}_torch-${TORCH_VER}_py${PY_VER}_${MPI_ID}-${MPI_HASH}_$(uname -m)"
KEY="$(printf '%s' "$KEY" | tr -c 'A-Za-z0-9._+-' '_')"
CACHE_DIR="$CACHE_ROOT/$KEY"
log "wheel cache: $CACHE_DIR"

find_cached_wheel() {
    compgen -G "$CACHE_DIR/horovod-${HVD_VERSION}-*.whl" | head -n1 || true
}

install_wheel() {
    local whl="$1"
    log "installing $(basename "$whl")"
    # Replace any (broken / stale) horovod, then install with its deps.
    pip_ uninstall -y -q horovod >/dev/null 2>&1 || true
    pip_ install -q "$whl" || die "pip install of $whl failed"
}

WHEEL=""
[[ $FORCE -eq 0 ]] && WHEEL="$(find_cached_wheel)"
if [[ -n "$WHEEL" ]]; then
    log "using cached wheel (no build)"
else
    # ----------------------------------------------------------------------
    # Build tools
    # ----------------------------------------------------------------------
    apt_install() {
        command -v apt-get >/dev/null 2>&1 || return 1
        local sudo=""
        if [[ $(id -u) -ne 0 ]]; then
            command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || return 1
            sudo="sudo -n"
        fi
        log "apt-get install $*"
        $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
    }
    cmake_ok() {
        command -v cmake >/dev/null 2>&1 || return 1
        local v; v="$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')"
        [[ -n "$v" && "$(printf '%s\n3.13\n' "$v" | sort -V | head -n1)" == "3.13" ]]
    }
    for tool in g++ make; do
        command -v "$tool" >/dev/null 2>&1 || apt_install "$tool" \
            || die "$tool is missing and could not be installed (install it, e.g. apt-get install $tool)"
    done
    if ! cmake_ok; then
        apt_install cmake || true
        cmake_ok || { log "installing cmake from PyPI into $PY_PREFIX"; pip_ install -q "cmake>=3.13"; }
        cmake_ok || die "no usable cmake >= 3.13"
    fi
    # PyPI cmake 4.x refuses the old cmake_minimum_required() of the bundled
    # third-party projects without this; harmless for cmake 3.x.
    export CMAKE_POLICY_VERSION_MINIMUM=3.5
    "$PY" -c "import setuptools, packaging" 2>/dev/null || pip_ install -q setuptools packaging
    log "tools: $(cmake --version | head -n1), $(g++ --version | head -n1)"

    # ----------------------------------------------------------------------
    # Fetch the sdist (cached next to the wheels) and patch it
    # ----------------------------------------------------------------------
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/horovod-build.XXXXXX")"
    if [[ "${HPCBENCH_KEEP_BUILD:-0}" == 1 ]]; then
        log "keeping build dir $WORK"
    else
        trap 'rm -rf "$WORK"' EXIT
    fi
    SDIST_DIR="$CACHE_ROOT/sdist"
    SDIST="$SDIST_DIR/horovod-${HVD_VERSION}.tar.gz"
    mkdir -p "$SDIST_DIR" "$CACHE_DIR"
    if [[ ! -s "$SDIST" ]]; then
        log "downloading horovod==$HVD_VERSION sdist from PyPI"
        pip_ download -q --no-deps --no-binary :all: "horovod==$HVD_VERSION" -d "$WORK/dl" \
            || die "pip download of the horovod $HVD_VERSION sdist failed"
        cp "$WORK/dl/horovod-${HVD_VERSION}.tar.gz" "$SDIST.tmp.$$" && mv "$SDIST.tmp.$$" "$SDIST"
    fi
    tar -xzf "$SDIST" -C "$WORK" || die "cannot unpack $SDIST"
    SRC="$WORK/horovod-$HVD_VERSION"

    log "patching CMAKE_CXX_STANDARD 14 -> 17 (torch 2.x headers need C++17)"
    for f in CMakeLists.txt horovod/torch/CMakeLists.txt; do
        [[ -f "$SRC/$f" ]] || die "patch: $f not found in the sdist"
        grep -q 'set(CMAKE_CXX_STANDARD 14)' "$SRC/$f" \
            || die "patch: 'set(CMAKE_CXX_STANDARD 14)' not found in $f (unexpected horovod source)"
        sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/g' "$SRC/$f"
        if grep -q 'CMAKE_CXX_STANDARD 14' "$SRC/$f" || ! grep -q 'set(CMAKE_CXX_STANDARD 17)' "$SRC/$f"; then
            die "patch did not apply to $f"
        fi
    done

    # ----------------------------------------------------------------------
    # Build the wheel
    # ----------------------------------------------------------------------
    export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1
    export HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
    unset HOROVOD_GPU_OPERATIONS HOROVOD_CUDA_HOME
    export MAKEFLAGS="-j$JOBS"        # horovod's setup.py uses -j8 otherwise
    BUILD_LOG="$WORK/build.log"
    log "building wheel with $JOBS jobs (several minutes; log: $BUILD_LOG)"
    t0=$SECONDS
    if ! pip_ wheel -v --no-deps --no-build-isolation -w "$WORK/dist" "$SRC" >"$BUILD_LOG" 2>&1; then
        tail -n 80 "$BUILD_LOG" >&2
        cp "$BUILD_LOG" "$CACHE_ROOT/horovod-build-failed.log" 2>/dev/null \
            && log "full log saved to $CACHE_ROOT/horovod-build-failed.log"
        die "horovod wheel build failed (last lines of the log above)"
    fi
    grep -E 'Found (MPI|Pytorch)|MPI (include path|libraries)' "$BUILD_LOG" | sed 's/^ */  cmake: /' >&2 || true
    log "wheel built in $((SECONDS - t0)) s"
    BUILT="$(compgen -G "$WORK/dist/horovod-${HVD_VERSION}-*.whl" | head -n1 || true)"
    [[ -n "$BUILT" ]] || die "pip wheel succeeded but no horovod wheel in $WORK/dist"
    cp "$BUILT" "$CACHE_DIR/.$(basename "$BUILT").tmp.$$"
    rm -f "$CACHE_DIR"/horovod-"${HVD_VERSION}"-*.whl
    mv "$CACHE_DIR/.$(basename "$BUILT").tmp.$$" "$CACHE_DIR/$(basename "$BUILT")"
    WHEEL="$CACHE_DIR/$(basename "$BUILT")"
    log "cached $WHEEL"
fi

install_wheel "$WHEEL"
import_ok || { "$PY" -c "$IMPORT_CHECK" || true; die "installed horovod does not import (stale cache? re-run with -f)"; }
if [[ $VERIFY -eq 1 ]]; then verify; fi
log "done: horovod $HVD_VERSION installed in $PY_PREFIX"
