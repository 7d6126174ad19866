#!/usr/bin/env bash
# The tutorials under `ulimit -v` (issue 35): at every address-space limit of the sweep a
# run either completes or ends with an "out of memory" error naming the op, within a
# time bound; never a hang (OpenBLAS retried its buffer's allocation forever) or a
# crash. Arguments: the 02_mlp and 03_lenet binaries. AddressSanitizer reserves
# terabytes of shadow memory, so under it the limits cannot apply: skipped there.
set -u
mlp=$(realpath "$1") lenet=$(realpath "$2")
out_dir="${TEST_TMPDIR:-$(mktemp -d)}"
cd "$out_dir" || exit 1
if grep -qa __asan_init "$mlp"; then
  echo "skipped: built with AddressSanitizer, which ignores address-space limits"
  exit 0
fi
data=(--data /usr/share/datasets/fashion-mnist)
[[ -d /usr/share/datasets/fashion-mnist ]] || data=(--synthetic)
TIME_BOUND=60
failures=0 completed=0 refused=0

# run NAME LIMIT_KB COMMAND...: completes, or fails with "out of memory", within TIME_BOUND.
run() {
  local name="$1" limit="$2"
  shift 2
  local log="$out_dir/$name-$limit.log" start=$SECONDS
  (ulimit -v "$limit" && exec timeout -k 5 "$TIME_BOUND" "$@") >"$log" 2>&1
  local rc=$? took=$((SECONDS - start))
  if [[ $rc -eq 0 ]]; then
    completed=$((completed + 1)); echo "ok   $name at $limit KiB: completed ($took s)"
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    failures=$((failures + 1)); echo "FAIL $name at $limit KiB: still running after $TIME_BOUND s"; tail -3 "$log"
  elif [[ $rc -gt 128 ]]; then
    failures=$((failures + 1)); echo "FAIL $name at $limit KiB: killed by signal $((rc - 128))"; tail -3 "$log"
  elif grep -q "out of memory" "$log"; then
    refused=$((refused + 1)); echo "ok   $name at $limit KiB: $(grep -m1 'out of memory' "$log" | cut -c1-150) ($took s)"
  else
    failures=$((failures + 1)); echo "FAIL $name at $limit KiB: exit code $rc without an out-of-memory message"
    tail -3 "$log"
  fi
}

for limit in 200000 300000 400000 500000 550000 600000 700000 800000 1000000 1400000; do
  run mlp "$limit" "$mlp" "${data[@]}" --max-steps 10 --checkpoint mlp.safetensors --plot mlp.svg
  run mlp_bf16 "$limit" "$mlp" "${data[@]}" --max-steps 10 --amp bf16 --checkpoint mlp.safetensors --plot mlp.svg
  run lenet "$limit" "$lenet" "${data[@]}" --max-steps 5 --plot lenet.svg
done
# Both outcomes must occur, or the sweep no longer spans the interesting range.
[[ $completed -gt 0 ]] || { echo "FAIL: no run completed even at the largest limit"; failures=$((failures + 1)); }
[[ $refused -gt 0 ]] || { echo "FAIL: no run ran out of memory even at the smallest limit"; failures=$((failures + 1)); }
echo "$completed completed, $refused out of memory, $failures failed"
[[ $failures -eq 0 ]]
