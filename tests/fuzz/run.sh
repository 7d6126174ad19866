#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (no Bazel) and runs each for a while.
#   tests/fuzz/run.sh [seconds per target, default 60] [target ...]
# Targets: idx_fuzzer (data/mnist.c's tg_idx_parse), safetensors_fuzzer
# (io/safetensors.c's tg_safetensors_parse + serialize round trip), checkpoint_fuzzer
# (io/checkpoint.c's loader into a model + optimizer + scheduler and a quantised model:
# the whole library, so its first build takes a few minutes), cifar_fuzzer
# (data/cifar.c's tg_cifar_parse, every kind), image_fuzzer (data/image_decode.c's
# tg_image_decode: libpng and libjpeg-turbo behind their longjmp error handlers).
# The committed seeds in tests/fuzz/corpus/<target>/ are read, never written: new
# inputs go to a scratch corpus under $TG_FUZZ_OUT (default /tmp/tg_fuzz), crashes to
# $TG_FUZZ_OUT/<target>-crash-*. Exit status non-zero when a target finds a bug.
# Longer runs and reproducing a crash: docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(idx_fuzzer safetensors_fuzzer checkpoint_fuzzer cifar_fuzzer image_fuzzer)
out=${TG_FUZZ_OUT:-/tmp/tg_fuzz}
mkdir -p "$out"
CC=${CC:-clang}
flags=(-std=c11 -g -O1 -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Wno-unknown-pragmas)
declare -A sources=(
  [idx_fuzzer]="data/mnist.c"
  [safetensors_fuzzer]="io/safetensors.c io/atomic_file.c io/tensor_map.c io/crc32c.c"
  [checkpoint_fuzzer]="$(echo io/*.c optim/*.c nn/module.c nn/load_check.c)"
  [cifar_fuzzer]="data/cifar.c"
  [image_fuzzer]="data/image_decode.c"
)
# The rest of the library for checkpoint_fuzzer: compiled once, plain (no coverage, no
# sanitizers: the kernels are not what it fuzzes, and clang with UBSan took over ten
# minutes on one of them).
plain_library() {
  # Keyed by the headers' contents: objects of another tree (files since moved, or a
  # struct since changed) are never linked in; within one key a .c newer than its
  # object is recompiled.
  local key dir f srcs=()
  key=$(cat core/*.h autograd/*.h ops/*.h ops/cpu/*.h nn/*.h quant/*.h optim/*.h data/*.h io/*.h onnx/*.h | md5sum | cut -c1-12)
  dir="$out/plain-objects-$key"
  mkdir -p "$dir"
  for f in autograd/*.c ops/*.c ops/cpu/*.c nn/*.c quant/*.c data/*.c onnx/graph.c; do
    [[ $f == nn/module.c || $f == nn/load_check.c ]] && continue
    srcs+=("$f")
  done
  printf '%s\n' "${srcs[@]}" | xargs -P "$(nproc)" -I{} sh -c '
    o="$1/$(echo "$2" | tr / _).o"
    [ -f "$o" ] && [ "$o" -nt "$2" ] || '"$CC"' -std=c11 -O1 -g -D_GNU_SOURCE -I. -w -c "$2" -o "$o"' _ "$dir" {}
  for f in "${srcs[@]}"; do printf '%s ' "$dir/$(echo "$f" | tr / _).o"; done
  echo
}
libs=(-lz -lcjson -lpng -ljpeg -lm -lpthread)
declare -A extra_libs=([checkpoint_fuzzer]="-ldl") # OpenBLAS: loaded by ops/cpu/blas.c
status=0
for t in "${targets[@]}"; do
  [[ -n ${sources[$t]:-} ]] || { echo "unknown target $t" >&2; exit 2; }
  echo "== building $t"
  # shellcheck disable=SC2086
  objects=()
  [[ $t == checkpoint_fuzzer ]] && read -r -a objects < <(plain_library)
  $CC "${flags[@]}" core/*.c ${sources[$t]} "tests/fuzz/$t.c" "${objects[@]}" "${libs[@]}" ${extra_libs[$t]:-} \
    -o "$out/$t"
  mkdir -p "$out/corpus-$t"
  echo "== running $t for ${seconds}s"
  if ! "$out/$t" -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/$t-" \
        "$out/corpus-$t" "tests/fuzz/corpus/$t" 2>"$out/$t.log"; then
    echo >&2
    echo "!! $t failed; log: $out/$t.log" >&2
    tail -40 "$out/$t.log" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$out/$t.log" | sed "s/^/   /"
  fi
done
exit $status
