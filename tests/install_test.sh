#!/usr/bin/env bash
# //tests:install_test: installs tapegrad to a prefix with //:install, then builds and
# runs tests/install/main.c against the installed copy as a user outside the Bazel
# workspace would: `cc main.c $(pkg-config --cflags --libs tapegrad)`, statically
# from libtapegrad.a, and as a CMake project (find_package). Also checks the shared
# library's ABI: it exports exactly the functions of the public headers (the weak
# CUDA ones only when built), all C names, nothing else.
#   args: the //:install script
set -uo pipefail
install_script=$1
work=${TEST_TMPDIR:-$(mktemp -d)}
prefix=$work/prefix
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

"$install_script" --prefix="$prefix" || { echo "FAIL install"; exit 1; }
for f in lib/libtapegrad.so.0 lib/libtapegrad.so lib/libtapegrad.a include/tapegrad/tapegrad.h \
  include/tapegrad/core/tensor.h lib/pkgconfig/tapegrad.pc lib/cmake/tapegrad/tapegradConfig.cmake \
  lib/cmake/tapegrad/tapegradConfigVersion.cmake; do
  [[ -e $prefix/$f ]] || fail "installed file $f missing"
done
[[ ! -e $prefix/include/tapegrad/core/tensor_impl.h ]] || fail "an internal header was installed"
ok "installed to $prefix"

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
src=tests/install/main.c
# A sanitizer build (CI's asan stage) installs an instrumented library: its consumers
# are then built with the same sanitizers, as they would have to be.
san=()
if nm "$prefix/lib/libtapegrad.a" 2>/dev/null | grep ' U __asan_init' >/dev/null; then  # no -q: pipefail
  san=(-fsanitize=address,undefined)
  ok "instrumented library (asan build): consumers built with ${san[*]}"
fi
run() { # NAME BINARY: runs it, wants exit 0 and "ok"
  local out
  out=$("$2" 2>&1)
  if [[ $? -ne 0 || $out != *$'\nok (w 2.0000, b 1.0000)'* ]]; then fail "$1: $out"; else ok "$1: ${out##*$'\n'}"; fi
}

# 1. pkg-config, shared, warnings as errors.
if cc "${san[@]}" -std=c11 -Wall -Wextra -Werror "$src" $(pkg-config --cflags --libs tapegrad) -lm -o "$work/app_shared"; then
  run "cc \$(pkg-config --cflags --libs tapegrad)" "$work/app_shared"
  ldd "$work/app_shared" | grep "$prefix/lib/libtapegrad.so.0" >/dev/null || fail "app_shared does not load the installed library"
else
  fail "cc with pkg-config"
fi

# 2. Static: tapegrad-static.pc (the archive by its path, then its libraries).
if cc "${san[@]}" "$src" $(pkg-config --cflags --libs tapegrad-static) -o "$work/app_static"; then
  run "static libtapegrad.a (pkg-config tapegrad-static)" "$work/app_static"
  ! ldd "$work/app_static" | grep libtapegrad >/dev/null || fail "app_static loads libtapegrad.so"
else
  fail "static link"
fi

# 3. CMake: find_package(tapegrad), shared and static targets.
if cmake -S tests/install -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="${san[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san[*]}" \
  >"$work/cmake.log" 2>&1 && cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1; then
  run "cmake tapegrad::tapegrad" "$work/cmake/consumer"
  run "cmake tapegrad::tapegrad_static" "$work/cmake/consumer_static"
else
  fail "cmake: $(tail -20 "$work/cmake.log")"
fi

# 4. The ABI: exactly the public headers' functions, C names only.
so=$prefix/lib/libtapegrad.so.0
# Global symbols only (upper-case nm types): a local thread-local variable still has a
# dynamic-table entry for its TLS relocation, but nothing outside can bind to it.
exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sed 's/@.*//' | grep -v '^TAPEGRAD_0$' | sort)
declared=$(python3 tools/tapegrad_api.py functions | sort)
weak=$(python3 tools/tapegrad_api.py weak | sort)
cxx=$(grep '^_Z' <<<"$exported")
[[ -z $cxx ]] || fail "C++ symbols exported: $(head -3 <<<"$cxx")"
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
[[ -z $extra ]] || fail "exported but not in the public headers: $(echo $extra | head -c 300)"
missing=$(comm -23 <(echo "$declared") <(echo "$exported") | comm -23 - <(echo "$weak"))
[[ -z $missing ]] || fail "declared in the public headers but not exported: $(echo $missing | head -c 300)"
internal=$(nm -D --defined-only "$so" | grep -c ' tg_tensor_wrap\b')
[[ $internal -eq 0 ]] || fail "an internal function (tg_tensor_wrap) is exported"
ok "ABI: $(wc -l <<<"$exported") C functions exported, all declared in the public headers"

# 5. Data-parallel training: tapegrad-dist.pc (static, with MPI), a program run as a
# world of one rank (MPI's singleton). Open MPI's own allocations are suppressed for
# LeakSanitizer as in tests/distributed/run_mpi.sh.
for f in lib/libtapegrad_dist.a include/tapegrad/distributed/dist.h include/tapegrad/distributed/ddp.h \
  include/tapegrad/distributed/sync_batch_norm.h lib/pkgconfig/tapegrad-dist.pc; do
  [[ -e $prefix/$f ]] || fail "installed file $f missing"
done
if cc "${san[@]}" -std=c11 -Wall -Wextra -Werror tests/install/dist_main.c $(pkg-config --cflags --libs tapegrad-dist) \
  -o "$work/app_dist"; then
  out=$(TMPDIR=$work OMPI_MCA_mca_base_component_disable_dlclose=1 \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" \
    LSAN_OPTIONS="suppressions=$PWD/tests/distributed/lsan_openmpi.supp" "$work/app_dist" 2>&1)
  if [[ $? -ne 0 || $out != *"dist ok: rank 0 of 1"* ]]; then fail "app_dist: $out"; else ok "tapegrad-dist: ${out##*$'\n'}"; fi
else
  fail "cc with pkg-config tapegrad-dist"
fi

if [[ $failures -ne 0 ]]; then echo "$failures check(s) failed"; exit 1; fi
echo "all install checks passed"
