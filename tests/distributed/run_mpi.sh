#!/usr/bin/env bash
# Runs a test binary on N ranks of this machine under Open MPI's mpirun:
#   run_mpi.sh N BINARY [ARGS...]
# Fails when any rank fails (mpirun's exit status). Rank 0 writes the GoogleTest XML
# ($XML_OUTPUT_FILE) that Bazel and .ci/run read (tests/distributed/mpi_main.cc).
set -uo pipefail
ranks=$1 binary=$2
shift 2

# Open MPI refuses to start as root without these (CI and containers run as root), and
# more ranks than cores without oversubscription.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Ranks of one machine talk through shared memory (vader) with plain copies: the
# cross-memory-attach (process_vm_readv) that vader prefers is refused in containers.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# Bazel's sandbox has a private /tmp for the test; Open MPI's session folder goes there.
export TMPDIR=${TEST_TMPDIR:-${TMPDIR:-/tmp}}
# One thread per rank: the ranks share the machine's cores.
export TG_NUM_THREADS=${TG_NUM_THREADS:-1}
# Under LeakSanitizer (--config=asan): Open MPI's libraries keep allocations that they
# free only at process exit, or never; the suppressions name those libraries only.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Open MPI unloads its plugins (mca_*.so) at MPI_Finalize; kept loaded, their
# allocations are attributed to them (not to "<unknown module>") and suppressed by name.
export OMPI_MCA_mca_base_component_disable_dlclose=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$here/lsan_openmpi.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

exec mpirun -np "$ranks" --bind-to none "$binary" "$@"
