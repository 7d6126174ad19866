#!/usr/bin/env bash
# Runs every tutorial program given as an argument (the BUILD passes all six) for a
# few steps on generated data, and checks its exit code and a line of its output.
set -u
failures=0
runfiles="$PWD"
out_dir="${TEST_TMPDIR:-$(mktemp -d)}"
cd "$out_dir" || exit 1

# check NAME REGEX COMMAND...: runs COMMAND, wants exit code 0 and an output line matching REGEX.
check() {
  local name="$1" expected="$2"
  shift 2
  local log="$out_dir/$name.log" start=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL $name: exit code $rc"; tail -20 "$log"; failures=$((failures + 1)); return
  fi
  if ! grep -Eq "$expected" "$log"; then
    echo "FAIL $name: no line matching /$expected/"; tail -20 "$log"; failures=$((failures + 1)); return
  fi
  echo "ok   $name ($((SECONDS - start)) s): $(grep -Em1 "$expected" "$log")"
}

COMMON=(--synthetic --max-steps 5 --epochs 1 --device cpu)

for arg in "$@"; do
  b="$arg"
  [[ "$b" == /* ]] || b="$runfiles/$b"
  case "$(basename "$b")" in
    01_tensors_autograd)
      check 01_tensors_autograd '^digraph' "$b" --device cpu ;;
    02_mlp)
      check 02_mlp '^checkpoint: .*\(identical\)$' "$b" "${COMMON[@]}" --log mlp.csv --plot mlp.svg \
        --checkpoint mlp.safetensors --result-line
      check 02_mlp_result '^RESULT \{"bench": "mlp_epoch"' cat 02_mlp.log
      check 02_mlp_csv '^1,5,' cat mlp.csv
      check 02_mlp_svg '</svg>' cat mlp.svg ;;
    03_lenet)
      check 03_lenet '^epoch 1: train loss .* test accuracy' "$b" "${COMMON[@]}" --plot lenet.svg --result-line
      check 03_lenet_result '^RESULT \{"bench": "lenet_epoch"' cat 03_lenet.log ;;
    04_batchnorm_gpu)
      check 04_batchnorm_gpu '^step time, batch 64: cpu' "$b" "${COMMON[@]}" --compare-steps 2 --result-line
      check 04_batchnorm_gpu_result '^RESULT \{"bench": "lenet_bn_epoch"' cat 04_batchnorm_gpu.log ;;
    05_custom_op)
      check 05_custom_op '^gradcheck: ok' "$b" "${COMMON[@]}" ;;
    06_resume)
      check 06_resume_stop '^stopped after step 5' "$b" "${COMMON[@]}" --max-steps 10 --stop-after 5 \
        --checkpoint resume.safetensors
      check 06_resume_resume '^resumed at step 5' "$b" "${COMMON[@]}" --max-steps 10 --resume resume.safetensors
      check 06_resume_compare '^identical: yes' "$b" "${COMMON[@]}" --max-steps 10 --compare ;;
    *)
      echo "FAIL: unknown tutorial binary $arg"; failures=$((failures + 1)) ;;
  esac
done

if [[ $failures -ne 0 ]]; then echo "$failures check(s) failed"; exit 1; fi
echo "all tutorial smoke checks passed ($# programs)"
