#!/usr/bin/env bash
# Builds the CUDA tests and GPU benchmarks here, and runs them on a machine with a GPU.
#
#   tools/gpu_check.sh build   (here, with Bazel and the CUDA toolkit; no GPU needed)
#       Builds -c opt --define=tg_cuda_archs=sm_90 every tests/cuda/*_test and every
#       bench/*.c binary, and packs them with the shared libraries the GPU machine
#       lacks (OpenBLAS, gfortran, cJSON, zlib, ... as ldd finds them; not the CUDA
#       libraries, which that machine has) into gpu_stage/stage.tar.xz (gitignored).
#   tools/gpu_check.sh run     (on the GPU machine, from the repo root, gpu_stage carried)
#       Unpacks the stage, runs every staged test, then every benchmark and the
#       PyTorch twin bench/gpu_bench_torch.py, each under a time limit, all within
#       TG_GPU_CHECK_BUDGET seconds (default 270). Logs go to $OUT (default
#       gpu_stage/out): one <name>.log per binary and summary.txt. Exit status 0 when
#       every test passed (skips count as failures there: a GPU run must not skip).
#       cuda/nccl_test is the 1-rank NCCL all-reduce (//dist's NCCL half, no MPI);
#       NCCL itself is the GPU machine's, in its toolkit (/usr/local/cuda/lib64).
#
# With the device tool:  run(command="tools/gpu_check.sh run", carry=["gpu_stage"])
set -euo pipefail
cd "$(dirname "$0")/.."

STAGE=gpu_stage
ARCHS=${TG_CUDA_ARCHS:-sm_90}

build() {
    local tests=() benches=()
    for f in tests/cuda/*_test.cc; do tests+=("//tests:cuda/$(basename "${f%.cc}")"); done
    for f in bench/*.c; do benches+=("//bench:$(basename "${f%.c}")"); done
    echo "building ${#tests[@]} tests and ${#benches[@]} benchmarks (-c opt, $ARCHS)"
    ./bazelw build -c opt --define=tg_cuda_archs="$ARCHS" "${tests[@]}" "${benches[@]}"
    local bin
    bin=$(./bazelw info -c opt --define=tg_cuda_archs="$ARCHS" bazel-bin 2>/dev/null)
    rm -rf "$STAGE"
    mkdir -p "$STAGE/pack/tests" "$STAGE/pack/bench" "$STAGE/pack/lib"
    for f in tests/cuda/*_test.cc; do
        local name; name=$(basename "${f%.cc}")
        cp "$bin/tests/cuda/$name" "$STAGE/pack/tests/$name"
    done
    for f in bench/*.c; do
        local name; name=$(basename "${f%.c}")
        cp "$bin/bench/$name" "$STAGE/pack/bench/$name"
    done
    chmod u+w "$STAGE"/pack/tests/* "$STAGE"/pack/bench/*
    strip --strip-debug "$STAGE"/pack/tests/* "$STAGE"/pack/bench/*
    # Shared libraries outside the C runtime and the CUDA toolkit travel with the binaries.
    ldd "$STAGE"/pack/tests/* "$STAGE"/pack/bench/* | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
        case "$(basename "$lib")" in
        libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so*) ;;
        libcudart* | libcublas* | libcurand* | libnvrtc* | libnvJitLink* | libnccl*) ;;
        *) cp -L "$lib" "$STAGE/pack/lib/" ;;
        esac
    done
    echo "libraries staged:"; ls "$STAGE/pack/lib"
    git rev-parse HEAD > "$STAGE/pack/commit.txt" 2>/dev/null || true
    echo "$ARCHS" > "$STAGE/pack/archs.txt"
    tar -C "$STAGE" -cJf "$STAGE/stage.tar.xz" pack
    rm -rf "$STAGE/pack"
    ls -l "$STAGE/stage.tar.xz"
    local size; size=$(stat -c %s "$STAGE/stage.tar.xz")
    if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
        echo "warning: the stage is $size bytes; the device tool carries at most 64 MiB" >&2
    fi
}

run() {
    local out=${OUT:-$STAGE/out} budget=${TG_GPU_CHECK_BUDGET:-270} work
    mkdir -p "$out"
    work=$(mktemp -d /tmp/tg_gpu_stage.XXXXXX)
    tar -C "$work" -xJf "$STAGE/stage.tar.xz"
    local pack="$work/pack"
    export LD_LIBRARY_PATH="$pack/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    local summary="$out/summary.txt" failed=0 start=$SECONDS
    {
        echo "commit $(cat "$pack/commit.txt" 2>/dev/null) archs $(cat "$pack/archs.txt")"
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
    } > "$summary"
    # left: seconds of the budget still free, keeping `reserve` for what follows
    left() { echo $((budget - (SECONDS - start) - $1)); }
    run_one() { # name limit command...
        local name=$1 limit=$2; shift 2
        local avail; avail=$(left 10)
        [ "$limit" -gt "$avail" ] && limit=$avail
        if [ "$limit" -le 5 ]; then
            echo "$name: NOT RUN (time budget spent)" | tee -a "$summary"
            failed=1
            return
        fi
        local t0=$SECONDS rc=0
        timeout -k 5 "$limit" "$@" > "$out/$name.log" 2>&1 || rc=$?
        echo "$name: rc=$rc ($((SECONDS - t0)) s)" | tee -a "$summary"
        [ $rc -ne 0 ] && failed=1
        return 0
    }
    for t in "$pack"/tests/*; do
        local name; name=$(basename "$t")
        run_one "$name" 90 "$t"
        if grep -q "SKIPPED \]" "$out/$name.log"; then
            echo "$name: has SKIPPED tests on a GPU machine" | tee -a "$summary"
            failed=1
        fi
        grep -E "^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?|^\[  FAILED  \] [A-Za-z]" "$out/$name.log" |
            sed "s/^/    /" >> "$summary" || true
    done
    # GPU benchmarks first, then the others (the CPU ones) while time remains.
    run_one gpu_bench 120 "$pack/bench/gpu_bench"
    if command -v python3 > /dev/null; then
        run_one gpu_bench_torch 120 python3 bench/gpu_bench_torch.py
    fi
    for b in "$pack"/bench/*; do
        local name; name=$(basename "$b")
        [ "$name" = gpu_bench ] && continue
        run_one "bench_$name" 60 "$b"
    done
    grep -h "^RESULT" "$out"/gpu_bench*.log > "$out/gpu_results.txt" 2>/dev/null || true
    echo "total $((SECONDS - start)) s" | tee -a "$summary"
    rm -rf "$work"
    return $failed
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
    echo "usage: tools/gpu_check.sh build|run" >&2
    exit 2
    ;;
esac
