#!/usr/bin/env bash
# Builds the CUDA tests and GPU benchmarks here, and runs them on a machine with a GPU.
#
#   tools/gpu_check.sh build   (here, with Bazel and the CUDA toolkit; no GPU needed)
#       Builds -c opt --define=tg_cuda_archs=sm_90 every tests/cuda/*_test and every
#       bench/*.c binary, and packs them with the shared libraries the GPU machine
#       lacks (OpenBLAS by name, gfortran, cJSON, zlib, ... as ldd finds them; not the CUDA
#       libraries, which that machine has) into gpu_stage/stage.tar.xz (gitignored).
#       It also packs the tutorials TUTORIALS (CUDA build) with the same libraries and the
#       Fashion-MNIST files into gpu_stage/tutorials.tar (a second carry: both together
#       pass the device tool's 64 MiB).
#   tools/gpu_check.sh run     (on the GPU machine, from the repo root, gpu_stage carried)
#       Unpacks the stage, runs every staged test, then every benchmark and the
#       PyTorch twin bench/gpu_bench_torch.py, each under a time limit, all within
#       TG_GPU_CHECK_BUDGET seconds (default 270). Logs go to $OUT (default
#       gpu_stage/out): one <name>.log per binary and summary.txt. Exit status 0 when
#       every test passed (skips count as failures there: a GPU run must not skip).
#       cuda/nccl_test is the 1-rank NCCL all-reduce (//distributed's NCCL half, no MPI);
#       NCCL itself is the GPU machine's, in its toolkit (/usr/local/cuda/lib64).
#
#   tools/gpu_check.sh models      (on the GPU machine, gpu_stage/stage.tar.xz carried)
#       The models past MNIST (issues 32 and 33): bench/gpu_models (lesson 13's ResNet-20 at
#       batch 128 and ResNet-18 at 256, lesson 10's GPT at GPT-2 small's shape; float32 and
#       autocast bf16; the GPT's tokens/s and MFU against the GPU's bf16 peak), then its
#       twin bench/gpu_models_torch.py eager, torch.compile and (the GPT)
#       mode="reduce-overhead", one model a process, within TG_GPU_CHECK_BUDGET seconds
#       (default 540); the RESULT lines gathered in models_results.txt.
#
#   tools/gpu_check.sh tutorials   (on the GPU machine, gpu_stage/tutorials.tar carried)
#       Puts the data where the tutorials look (/usr/share/datasets/fashion-mnist), then
#       trains each tutorial on cuda:0 for one epoch, float32 and under --amp bf16 / fp16
#       where it has --amp, with --result-line, then 300 steps of 02 and 04 under
#       TG_PROFILE=1 (float32 and fp16); logs and summary.txt as `run`.
#
# With the device tool:  run(command="tools/gpu_check.sh run", carry=["gpu_stage/stage.tar.xz"])
#                        run(command="tools/gpu_check.sh models", carry=["gpu_stage/stage.tar.xz"])
#                        run(command="tools/gpu_check.sh tutorials", carry=["gpu_stage/tutorials.tar"])
set -euo pipefail
cd "$(dirname "$0")/.."

STAGE=gpu_stage
ARCHS=${TG_CUDA_ARCHS:-sm_90}
TUTORIALS=(02_mlp 03_lenet 04_batchnorm_gpu 05_custom_op)
DATA=/usr/share/datasets/fashion-mnist

# Copies the shared libraries that binaries in $1 need, outside the C runtime and the CUDA
# toolkit, into $2.
# OpenBLAS is not among them (ops/cpu/blas.c loads it with dlopen), so it and what it needs
# are added by name: on the GPU machine the library finds it as libopenblas.so.0 on
# LD_LIBRARY_PATH.
OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0
stage_libs() {
    cp -L "$OPENBLAS" "$2/"
    ldd "$1"/* "$OPENBLAS" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
        case "$(basename "$lib")" in
        libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so*) ;;
        libcudart* | libcublas* | libcurand* | libnvrtc* | libnvJitLink* | libnccl*) ;;
        *) cp -L "$lib" "$2/" ;;
        esac
    done
}

build() {
    local tests=() benches=() tutorials=()
    for f in tests/cuda/*_test.cc; do tests+=("//tests:cuda/$(basename "${f%.cc}")"); done
    for f in bench/*.c; do benches+=("//bench:$(basename "${f%.c}")"); done
    for t in "${TUTORIALS[@]}"; do tutorials+=("//tutorials/$t"); done
    echo "building ${#tests[@]} tests, ${#benches[@]} benchmarks and ${#tutorials[@]} tutorials (-c opt, $ARCHS)"
    ./bazelw build -c opt --define=tg_cuda_archs="$ARCHS" "${tests[@]}" "${benches[@]}" "${tutorials[@]}"
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
    mkdir -p "$STAGE/pack/all"
    cp "$STAGE"/pack/tests/* "$STAGE"/pack/bench/* "$STAGE/pack/all/"
    stage_libs "$STAGE/pack/all" "$STAGE/pack/lib"
    rm -rf "$STAGE/pack/all"
    echo "libraries staged:"; ls "$STAGE/pack/lib"
    git rev-parse HEAD > "$STAGE/pack/commit.txt" 2>/dev/null || true
    echo "$ARCHS" > "$STAGE/pack/archs.txt"
    tar -C "$STAGE" -cJf "$STAGE/stage.tar.xz" pack
    rm -rf "$STAGE/pack"
    ls -l "$STAGE/stage.tar.xz"
    # The tutorials and the data (already gzip-compressed: a plain tar).
    local tut="$STAGE/tpack"
    mkdir -p "$tut/bin" "$tut/lib" "$tut/data"
    for t in "${TUTORIALS[@]}"; do cp "$bin/tutorials/$t/$t" "$tut/bin/$t"; done
    chmod u+w "$tut"/bin/*
    strip --strip-debug "$tut"/bin/*
    stage_libs "$tut/bin" "$tut/lib"
    xz -T0 "$tut"/bin/* "$tut"/lib/*
    if [ -d "$DATA" ]; then cp "$DATA"/*-ubyte.gz "$tut/data/"; else echo "warning: no $DATA; the tutorials will not run" >&2; fi
    git rev-parse HEAD > "$tut/commit.txt" 2>/dev/null || true
    tar -C "$STAGE" -cf "$STAGE/tutorials.tar" tpack
    rm -rf "$tut"
    ls -l "$STAGE/stage.tar.xz" "$STAGE/tutorials.tar"
    local f size
    for f in "$STAGE/stage.tar.xz" "$STAGE/tutorials.tar"; do
        size=$(stat -c %s "$f")
        if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
            echo "warning: $f is $size bytes; the device tool carries at most 64 MiB a call" >&2
        fi
    done
}

# The two GPU-side commands share these. Each sets, as locals that these see (bash's
# dynamic scope), out (the logs' folder), summary, budget, start and failed.
# Starts $summary with the line $1 and the GPU nvidia-smi sees.
begin_summary() {
    {
        echo "$1"
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
    } > "$summary"
}
# The seconds of the budget still free, keeping $1 for what follows.
left() { echo $((budget - (SECONDS - start) - $1)); }
# Runs a command under a time limit (within the budget) into $out/<name>.log and notes
# its exit status in the summary: run_one name limit command...
run_one() {
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

tutorials() {
    local out=${OUT:-$STAGE/out} budget=${TG_GPU_CHECK_BUDGET:-270} work
    mkdir -p "$out"
    work=$(mktemp -d /tmp/tg_gpu_tutorials.XXXXXX)
    tar -C "$work" -xf "$STAGE/tutorials.tar"
    local pack="$work/tpack"
    xz -d "$pack"/bin/*.xz "$pack"/lib/*.xz
    if [ ! -d "$DATA" ]; then mkdir -p "$DATA" && cp "$pack"/data/* "$DATA/"; fi
    export LD_LIBRARY_PATH="$pack/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    local summary="$out/summary.txt" failed=0 start=$SECONDS
    begin_summary "tutorials at commit $(cat "$pack/commit.txt" 2>/dev/null)"
    local t amp name
    for t in "${TUTORIALS[@]}"; do
        for amp in none bf16 fp16; do
            case "$t:$amp" in 02_mlp:* | 04_batchnorm_gpu:* | *:none) ;; *) continue ;; esac
            name=$t
            [ "$amp" != none ] && name="${t}_amp_$amp"
            local args=(--device cuda --epochs 1)
            [ "$t" != 05_custom_op ] && args+=(--result-line) # 05 has no RESULT line
            [ "$amp" != none ] && args+=(--amp "$amp")
            run_one "$name" 120 "$pack/bin/$t" "${args[@]}"
            grep -h "^RESULT\|accuracy\|step time\|gradcheck\|forward on\|error" "$out/$name.log" 2>/dev/null |
                sed "s/^/    /" | tail -8 >> "$summary" || true
        done
    done
    # Where a GPU step's time goes (TG_PROFILE's table, host-side: launches and waits).
    for t in 02_mlp 04_batchnorm_gpu; do
        for amp in none fp16; do
            name="profile_${t}_$amp"
            local pargs=(--device cuda --max-steps 300)
            [ "$amp" != none ] && pargs+=(--amp "$amp")
            [ "$(left 0)" -le 40 ] && break
            TG_PROFILE=1 timeout -k 5 30 "$pack/bin/$t" "${pargs[@]}" > "$out/$name.log" 2>&1 || true
        done
    done
    echo "total $((SECONDS - start)) s" | tee -a "$summary"
    rm -rf "$work"
    return $failed
}

# Unpacks gpu_stage/stage.tar.xz into a fresh /tmp/tg_gpu_$1.* folder, sets the caller's
# work (that folder) and pack (its binaries), puts the staged libraries on
# LD_LIBRARY_PATH and makes the caller's $out. Shared by run and models.
unpack_stage() {
    mkdir -p "$out"
    work=$(mktemp -d "/tmp/tg_gpu_$1.XXXXXX")
    tar -C "$work" -xJf "$STAGE/stage.tar.xz"
    pack="$work/pack"
    export LD_LIBRARY_PATH="$pack/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

run() {
    local out=${OUT:-$STAGE/out} budget=${TG_GPU_CHECK_BUDGET:-270} work pack
    unpack_stage stage
    local summary="$out/summary.txt" failed=0 start=$SECONDS
    begin_summary "commit $(cat "$pack/commit.txt" 2>/dev/null) archs $(cat "$pack/archs.txt")"
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
        case "$name" in gpu_bench | gpu_models) continue ;; esac # gpu_models: the models command
        run_one "bench_$name" 60 "$b"
    done
    grep -h "^RESULT" "$out"/gpu_bench*.log > "$out/gpu_results.txt" 2>/dev/null || true
    echo "total $((SECONDS - start)) s" | tee -a "$summary"
    rm -rf "$work"
    return $failed
}

# The dense bf16 Tensor Core peak of this GPU in TFLOP/s, for MFU (0: not known).
bf16_peak_tflops() {
    case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *H100*PCIe*) echo 756 ;;
    *H100* | *H200*) echo 989.4 ;;
    *A100*) echo 312 ;;
    *) echo 0 ;;
    esac
}

models() {
    local out=${OUT:-$STAGE/out} budget=${TG_GPU_CHECK_BUDGET:-540} work pack
    unpack_stage models
    local summary="$out/summary.txt" failed=0 start=$SECONDS peak m mode
    peak=$(bf16_peak_tflops)
    begin_summary "models at commit $(cat "$pack/commit.txt" 2>/dev/null), bf16 peak $peak TFLOP/s"
    run_one gpu_models 150 "$pack/bench/gpu_models" --peak-tflops "$peak"
    run_one gpu_models_torch 120 python3 bench/gpu_models_torch.py --peak-tflops "$peak"
    for mode in compile reduce-overhead; do
        for m in gpt2 resnet18 resnet20; do
            [ "$mode" = reduce-overhead ] && [ "$m" != gpt2 ] && continue
            run_one "gpu_models_torch_${mode}_$m" 150 \
                python3 bench/gpu_models_torch.py --mode "$mode" --only "$m" --peak-tflops "$peak"
        done
    done
    grep -h "^RESULT" "$out"/gpu_models*.log > "$out/models_results.txt" 2>/dev/null || true
    sed "s/^/    /" "$out/models_results.txt" >> "$summary"
    echo "total $((SECONDS - start)) s" | tee -a "$summary"
    rm -rf "$work"
    return $failed
}

case "${1:-}" in
build) build ;;
run) run ;;
models) models ;;
tutorials) tutorials ;;
*)
    echo "usage: tools/gpu_check.sh build|run|models|tutorials" >&2
    exit 2
    ;;
esac
