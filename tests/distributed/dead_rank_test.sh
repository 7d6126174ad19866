#!/usr/bin/env bash
# A rank that dies (SIGKILL) while the other waits in a collective: the job must end
# with an error within seconds, not wait for TG_DIST_TIMEOUT (120 s here), and the
# surviving rank must say that another rank died. Then WORLD_SIZE=3 against
# mpirun -np 2: tg_dist_init refuses it with a message.
#   dead_rank_test.sh RUN_MPI_SH BINARY
set -uo pipefail
run_mpi=$1 binary=$2
start=$SECONDS
output=$(timeout 100 "$run_mpi" 2 "$binary" 2>&1)
status=$?
elapsed=$((SECONDS - start))
echo "$output"
echo "exit status $status after ${elapsed}s"
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ $status -ne 0 ]] || fail "the job exited 0 although rank 1 died"
[[ $status -ne 124 ]] || fail "the job hung (killed by timeout after 100 s)"
[[ $elapsed -lt 60 ]] || fail "the job took ${elapsed}s to end"
grep -q "rank 1: dying now" <<<"$output" || fail "rank 1 did not get to its death"
grep -q "tg_dist: rank 0 of 2 stopped by the launcher" <<<"$output" ||
  fail "rank 0 did not say why it stopped"

# torchrun-style variables that contradict MPI's world are refused by tg_dist_init.
output=$(WORLD_SIZE=3 timeout 100 "$run_mpi" 2 "$binary" 2>&1)
status=$?
echo "$output"
[[ $status -ne 0 ]] || fail "WORLD_SIZE=3 under mpirun -np 2 was accepted"
grep -q "tg_dist_init failed: tg_dist_init: RANK=(unset) / WORLD_SIZE=3 are set, but MPI's world has this process as rank [01] of 2" <<<"$output" ||
  fail "no message about WORLD_SIZE=3"
echo PASS
