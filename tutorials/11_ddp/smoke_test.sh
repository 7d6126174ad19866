#!/usr/bin/env bash
# Lesson 11 for a few steps on 2 ranks, generated data: //tutorials:ddp_smoke_test.
#   smoke_test.sh RUN_MPI_SH 11_DDP_BINARY
set -uo pipefail
run_mpi=$1 binary=$2
checkpoint="${TEST_TMPDIR:-$(mktemp -d)}/ddp.tgc"
output=$("$run_mpi" 2 "$binary" --synthetic --max-steps 6 --epochs 1 --device cpu --checkpoint "$checkpoint" 2>&1)
status=$?
echo "$output"
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ $status -eq 0 ]] || fail "exit status $status"
for line in '2 rank\(s\), batch 32 per rank \(64 per step\)' '^epoch 1: train loss [0-9.]+ \(mean over ranks\)' \
            '^all-reduce: 1\.7 MB per step' 'saved by rank 0 at step 6, loaded on 2 rank\(s\)' \
            '^live tensors at exit: 0$'; do
  grep -Eq "$line" <<<"$output" || fail "no line matching /$line/"
done
echo PASS
