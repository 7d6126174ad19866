#!/usr/bin/env bash
# Fast edit-compile-test loop without Bazel (Bazel stays the real build: ./bazelw test //...).
#   tools/dev_test.sh tests/core/tensor_test.cc [gtest args...]
# Compiles the library's C files incrementally into /tmp/tg_dev (objects keyed by
# path and mtime; TG_DEV_OUT overrides the folder) and links the test with a GoogleTest built once from /usr/src.
set -euo pipefail
cd "$(dirname "$0")/.."
test_file=$1; shift
out=${TG_DEV_OUT:-/tmp/tg_dev}; mkdir -p "$out/obj"
cflags="-std=c11 -O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -I. ${TG_DEV_CFLAGS:-}"
if [[ ! -f $out/libgtest.a ]]; then
  g++ -std=c++17 -O1 -I/usr/src/googletest/googletest/include -I/usr/src/googletest/googletest \
    -c /usr/src/googletest/googletest/src/gtest-all.cc -o "$out/gtest-all.o"
  g++ -std=c++17 -I/usr/src/googletest/googletest/include \
    -c /usr/src/googletest/googletest/src/gtest_main.cc -o "$out/gtest_main.o"
  ar rcs "$out/libgtest.a" "$out/gtest-all.o" "$out/gtest_main.o"
fi
objs=()
for src in core/*.c autograd/*.c ops/*.c ops/cpu/*.c nn/*.c quant/*.c optim/*.c data/*.c io/*.c; do
  [[ -f $src ]] || continue
  obj="$out/obj/$(echo "$src" | tr / _).o"
  if [[ ! -f $obj || $src -nt $obj || -n $(find core autograd ops nn quant optim data io -name '*.h' -newer "$obj" 2>/dev/null | head -1) ]]; then
    gcc $cflags -c "$src" -o "$obj" &
  fi
  objs+=("$obj")
done
wait
name=$(basename "$test_file" .cc)
g++ -std=c++17 -O1 -g -I. -Itests -I/usr/src/googletest/googletest/include ${TG_DEV_CFLAGS:-} \
  "$test_file" $(ls tests/*.c tests/*.cc 2>/dev/null | grep -v '_test.cc' || true) "${objs[@]}" "$out/libgtest.a" \
  -ldl -lz -lcjson -lpng -ljpeg -lm -lpthread -o "$out/$name"
"$out/$name" "$@"
