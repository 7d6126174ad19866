# Sourced by bench/compare.sh and bench/busy.sh: N CPU-bound background processes
# (`while :; do :; done` in sh) that start before each measured run and stop right
# after it, so that every program is measured under the same load.
#   start_load N; ...; stop_load
load_pids=()
start_load() {
  local i
  for ((i = 0; i < $1; i++)); do
    sh -c 'while :; do :; done' &
    load_pids+=($!)
  done
  [[ $1 -eq 0 ]] || sleep 0.5 # let the scheduler see them
}
stop_load() {
  local p
  for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${load_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  load_pids=()
}
