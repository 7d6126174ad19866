#!/usr/bin/env bash
# Runs every tutorial program given as an argument (the BUILD passes all of them) for a
# few steps on generated data, and checks its exit code and a line of its output.
#   smoke_test.sh CHECK_ONNX_PY LESSON_BINARY...
# CHECK_ONNX_PY (tests/onnx/fixtures/check_onnx.py) checks the files --export-onnx writes
# with Debian's python3-onnx (onnx.checker, full check), run by /usr/bin/python3.
set -u
failures=0
runfiles="$PWD"
check_onnx="$1"
shift
[[ "$check_onnx" == /* ]] || check_onnx="$runfiles/$check_onnx"
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

# refused NAME REGEX COMMAND...: wants exit code 2 and a message matching REGEX
# (an option the lesson does not honour is refused, never accepted and ignored).
refused() {
  local name="$1" expected="$2"
  shift 2
  local log="$out_dir/$name.log"
  "$@" >"$log" 2>&1
  local rc=$?
  if [[ $rc -ne 2 ]] || ! grep -Eq "$expected" "$log"; then
    echo "FAIL $name: wanted exit code 2 and /$expected/, got $rc"; tail -5 "$log"; failures=$((failures + 1)); return
  fi
  echo "ok   $name: $(grep -Em1 "$expected" "$log")"
}

# export_fails NAME REGEX COMMAND...: a lesson whose --export-onnx cannot be written trains
# all the same (its output has a line matching REGEX), prints the exporter's message and
# exits with status 1.
export_fails() {
  local name="$1" expected="$2"
  shift 2
  local log="$out_dir/$name.log"
  "$@" >"$log" 2>&1
  local rc=$?
  if [[ $rc -ne 1 ]] || ! grep -Eq "$expected" "$log" || ! grep -Eq '^--export-onnx .*: tg_onnx_export: ' "$log"; then
    echo "FAIL $name: wanted exit code 1, /$expected/ and the exporter's message, got $rc"; tail -5 "$log"
    failures=$((failures + 1)); return
  fi
  echo "ok   $name: $(grep -Em1 '^--export-onnx ' "$log")"
}

# without NAME REGEX FILE: FILE (a log written by check) has no line matching REGEX.
without() {
  if grep -Eqi "$2" "$out_dir/$3"; then
    echo "FAIL $1: a line matches /$2/"; grep -Ei "$2" "$out_dir/$3" | head -3; failures=$((failures + 1)); return
  fi
  echo "ok   $1"
}

COMMON=(--synthetic --max-steps 5 --epochs 1 --device cpu)

# onnx_ok NAME FILE: FILE (written by a lesson's --export-onnx) passes onnx.checker.
onnx_ok() {
  check "$1" '^onnx\.checker: .* ok \(opset 17' /usr/bin/python3 "$check_onnx" "$2"
}

for arg in "$@"; do
  b="$arg"
  [[ "$b" == /* ]] || b="$runfiles/$b"
  case "$(basename "$b")" in
    01_tensors_autograd)
      check 01_tensors_autograd '^digraph' "$b" --device cpu
      refused 01_tensors_autograd_epochs "unknown option for this lesson '--epochs'" "$b" --epochs 2 ;;
    02_mlp)
      check 02_mlp '^checkpoint: .*\(identical\)$' "$b" "${COMMON[@]}" --log mlp.csv --plot mlp.svg \
        --checkpoint mlp.safetensors --result-line --export-onnx mlp.onnx
      check 02_mlp_exported '^exported (.*/)?mlp\.onnx$' cat 02_mlp.log
      onnx_ok 02_mlp_onnx mlp.onnx
      check 02_mlp_result '^RESULT \{"bench": "mlp_epoch"' cat 02_mlp.log
      check 02_mlp_csv '^1,5,' cat mlp.csv
      check 02_mlp_svg '</svg>' cat mlp.svg
      # --name=value; --max-steps ending the run inside epoch 2 of 3 (16 steps an epoch):
      # epoch 2 is reported with its 4 steps, epoch 3 never starts, no NaN loss.
      check 02_mlp_max_steps '^epoch 2: train loss [0-9]' "$b" --synthetic --device=cpu --epochs=3 --max-steps=20
      without 02_mlp_no_nan 'nan|^epoch 3' 02_mlp_max_steps.log
      refused 02_mlp_flag_value 'option takes no value' "$b" --synthetic=1
      refused 02_mlp_missing_value 'missing value after' "$b" --epochs
      refused 02_mlp_unknown "unknown option for this lesson '--no-such-option'" "$b" --synthetic --no-such-option
      check 02_mlp_amp '^training on cpu: .*, autocast bf16$' "$b" "${COMMON[@]}" --amp bf16 --plot mlp_amp.svg \
        --checkpoint mlp_amp.safetensors --result-line
      check 02_mlp_amp_result '^RESULT \{"bench": "mlp_amp_epoch"' cat 02_mlp_amp.log
      without 02_mlp_amp_no_nan 'nan' 02_mlp_amp.log
      refused 02_mlp_amp_fp16_cpu 'amp fp16 needs a CUDA device' "$b" --synthetic --device cpu --amp fp16
      refused 02_mlp_amp_bad "bad --amp \(bf16 or fp16\) 'fp8'" "$b" --synthetic --amp fp8 ;;
    03_lenet)
      check 03_lenet '^epoch 1: train loss .* test accuracy' "$b" "${COMMON[@]}" --plot lenet.svg --result-line \
        --export-onnx lenet.onnx
      check 03_lenet_exported '^exported (.*/)?lenet\.onnx$' cat 03_lenet.log
      onnx_ok 03_lenet_onnx lenet.onnx
      export_fails 03_lenet_export_unwritable '^epoch 1: train loss' "$b" "${COMMON[@]}" --plot lenet2.svg \
        --export-onnx "$out_dir/no-such-folder/lenet.onnx"
      check 03_lenet_result '^RESULT \{"bench": "lenet_epoch"' cat 03_lenet.log ;;
    04_batchnorm_gpu)
      check 04_batchnorm_gpu '^step time, batch 64: cpu' "$b" "${COMMON[@]}" --compare-steps 2 --result-line
      check 04_batchnorm_gpu_result '^RESULT \{"bench": "lenet_bn_epoch"' cat 04_batchnorm_gpu.log
      check 04_batchnorm_gpu_plot '^loss curve: ' "$b" "${COMMON[@]}" --compare-steps 0 --plot bn.svg
      check 04_batchnorm_gpu_svg '</svg>' cat bn.svg
      check 04_batchnorm_gpu_amp '^RESULT \{"bench": "lenet_bn_amp_epoch"' "$b" "${COMMON[@]}" --compare-steps 0 \
        --amp bf16 --result-line
      without 04_batchnorm_gpu_amp_no_nan 'nan' 04_batchnorm_gpu_amp.log ;;
    05_custom_op)
      # --export-onnx: the custom op is written by its own mapping (bias_swish_onnx)
      check 05_custom_op '^gradcheck: ok' "$b" "${COMMON[@]}" --export-onnx swish.onnx
      check 05_custom_op_exported '^exported (.*/)?swish\.onnx$' cat 05_custom_op.log
      onnx_ok 05_custom_op_onnx swish.onnx
      refused 05_custom_op_export_missing 'missing value after' "$b" --synthetic --export-onnx
      refused 05_custom_op_plot "unknown option for this lesson '--plot'" "$b" "${COMMON[@]}" --plot x.svg ;;
    06_resume)
      check 06_resume_stop '^stopped after step 5' "$b" "${COMMON[@]}" --max-steps 10 --stop-after 5 \
        --checkpoint resume.safetensors
      check 06_resume_resume '^resumed at step 5' "$b" "${COMMON[@]}" --max-steps 10 --resume resume.safetensors
      check 06_resume_compare '^identical: yes' "$b" "${COMMON[@]}" --max-steps 10 --compare ;;
    07_vae)
      check 07_vae '^epoch 1: train loss [0-9.]+, test loss [0-9.]+' "$b" "${COMMON[@]}" --plot vae.svg --result-line
      check 07_vae_result '^RESULT \{"bench": "vae_epoch"' cat 07_vae.log
      check 07_vae_no_leak '^live tensors at exit: 0$' cat 07_vae.log
      without 07_vae_no_nan 'nan' 07_vae.log ;;
    08_dcgan)
      check 08_dcgan '^epoch 1: Loss_D [0-9.]+, Loss_G [0-9.]+, 5 steps' "$b" "${COMMON[@]}" --png dcgan.png \
        --result-line
      check 08_dcgan_result '^RESULT \{"bench": "dcgan_epoch"' cat 08_dcgan.log
      check 08_dcgan_no_leak '^live tensors at exit: 0$' cat 08_dcgan.log
      without 08_dcgan_no_nan 'nan' 08_dcgan.log
      check 08_dcgan_png '^ 89 50 4e 47 0d 0a 1a 0a$' od -An -tx1 -N8 dcgan.png ;;
    09_lstm_lm)
      check 09_lstm_lm '^epoch 1: train loss [0-9.]+, valid loss [0-9.]+, valid perplexity [0-9.]+' "$b" "${COMMON[@]}" \
        --result-line
      check 09_lstm_lm_result '^RESULT \{"bench": "lstm_lm_epoch"' cat 09_lstm_lm.log
      check 09_lstm_lm_no_leak '^live tensors at exit: 0$' cat 09_lstm_lm.log
      without 09_lstm_lm_no_nan 'nan' 09_lstm_lm.log
      refused 09_lstm_lm_plot "unknown option for this lesson '--plot'" "$b" "${COMMON[@]}" --plot x.svg ;;
    10_gpt)
      # tiny sizes; 40 sampled tokens > --block-size 16, so the window moves on while sampling
      local_gpt=(--synthetic --max-steps 5 --device cpu --n-layer 2 --n-embd 32 --block-size 16 --batch-size 4
                 --eval-iters 2 --sample-tokens 40 --compare-kv-cache)
      check 10_gpt '^step 5: train loss [0-9.]+, val loss [0-9.]+' "$b" "${local_gpt[@]}" --result-line
      check 10_gpt_kv_cache '^kv cache vs whole window: identical' cat 10_gpt.log
      check 10_gpt_result '^RESULT \{"bench": "gpt_step"' cat 10_gpt.log
      check 10_gpt_no_leak '^live tensors at exit: 0$' cat 10_gpt.log
      without 10_gpt_no_nan 'loss -?nan' 10_gpt.log
      check 10_gpt_amp_checkpoint '^kv cache vs whole window: identical' "$b" "${local_gpt[@]}" --amp bf16 \
        --checkpoint-activations
      without 10_gpt_amp_no_nan 'loss -?nan' 10_gpt_amp_checkpoint.log
      check 10_gpt_no_kv_cache '^sample \(.*whole window each token' "$b" "${local_gpt[@]}" --no-kv-cache
      refused 10_gpt_epochs "unknown option for this lesson '--epochs'" "$b" --synthetic --epochs 1
      refused 10_gpt_heads 'not a multiple of --n-head' "$b" --synthetic --n-embd 30 --n-head 4 ;;
    13_resnet)
      # 2 steps at batch 128, the augmentation in 2 workers, the grid PNG, then a resume
      check 13_resnet '^epoch 1: train loss [0-9.]+, test loss [0-9.]+, test accuracy' "$b" --synthetic --max-steps 2 \
        --epochs 1 --device cpu --workers 2 --save-grid grid13.png --checkpoint resnet13.safetensors --result-line
      check 13_resnet_result '^RESULT \{"bench": "resnet20_epoch"' cat 13_resnet.log
      check 13_resnet_no_leak '^live tensors at exit: 0$' cat 13_resnet.log
      without 13_resnet_no_nan 'nan' 13_resnet.log
      check 13_resnet_png '^ 89 50 4e 47 0d 0a 1a 0a$' od -An -tx1 -N8 grid13.png
      check 13_resnet_resume '^resumed at step 2 ' "$b" --synthetic --max-steps 3 --epochs 1 --device cpu --workers 0 \
        --resume resnet13.safetensors
      refused 13_resnet_model 'bad --model' "$b" --synthetic --model resnet50 ;;
    12_prune_quantize)
      check 12_prune_quantize '^int8 file: .*\(identical\)$' "$b" --synthetic --max-steps 5 --finetune-steps 3
      check 12_prune_quantize_sparsity '^pruned \+ int8 .*sparsity 0\.9' cat 12_prune_quantize.log
      check 12_prune_quantize_lenet '^int8 file: .*lenet_12_int8.*\(identical\)$' cat 12_prune_quantize.log ;;
    *)
      echo "FAIL: unknown tutorial binary $arg"; failures=$((failures + 1)) ;;
  esac
done

if [[ $failures -ne 0 ]]; then echo "$failures check(s) failed"; exit 1; fi
echo "all tutorial smoke checks passed ($# programs)"
