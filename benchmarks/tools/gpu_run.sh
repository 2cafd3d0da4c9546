#!/usr/bin/env bash
# The GPU measurements (issue #17) in one command, on a machine with a CUDA GPU, torch and numba:
#
#   bash benchmarks/tools/gpu_run.sh OUT_DIR [SECONDS] [UNTIL]
#
# in the checkout's root, with the datasets mnist and adult where kernelscale finds them
# (KERNELSCALE_DATA). Within about SECONDS of wall time (default 540) it runs, logging every
# step to OUT_DIR/run.log and writing results there (five files in all):
#   1. the torch backend's tests, the GPU ones included (tests/test_torch_backend.py);
#   2. perf/gpu.py: kernel_matvec against torch's GEMM on the GPU (gpu-matvec.json);
#   3. with STUDY="--t0 240;--t0 10000 --block-size 8192" (say: settings of papers/dsg_stream.py,
#      separated by ';'): the stream's validation study of each setting, to STUDY_UNTIL examples
#      (default 1000000) or STUDY_S seconds (default 150), into dsg-stream-cuda-validation.json;
#   4. papers/dsg_stream.py --device cuda: the virtual-digit stream up to UNTIL examples (default
#      8.1M), with the study's best setting if there was a study, else with STREAM_ARGS (default
#      the headline's, "--t0 10000 --precond-ridge 1e-6 --block-size 8192 --batch-size 32768"),
#      for the time left after 130 s
#      are set aside for step 5 (none with PREDICT=0), profiled (stream-profile.txt); resumable
#      from STATE_DIR (default /tmp/dsg-stream-<setting>) when run again on the same machine;
#   5. perf/dsg_predict.py --devices cuda: adult predictions on the GPU against LIBSVM's, whose
#      SVC is fitted in the background meanwhile (dsg-predict-cuda.json).
# MATVEC=0 skips step 2 and PREDICT=0 step 5 (their results are then not rewritten).
# A dry run without a GPU: DEVICE=cpu QUICK=--quick bash benchmarks/tools/gpu_run.sh /tmp/dry 200 20000
set -u
OUT=${1:?usage: gpu_run.sh OUT_DIR [SECONDS] [UNTIL]}
SECONDS_TOTAL=${2:-540}
UNTIL=${3:-8100000}
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-}
STUDY=${STUDY:-}
STUDY_UNTIL=${STUDY_UNTIL:-1000000}
STUDY_S=${STUDY_S:-150}
MATVEC=${MATVEC:-1}
PREDICT=${PREDICT:-1}
mkdir -p "$OUT"
LOG="$OUT/run.log"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
SVC=/tmp/kernelscale-adult-svc.joblib

step() { echo "== $* (at ${SECONDS} s)" >>"$LOG"; }

if [ "$PREDICT" = 1 ]; then
  python -m benchmarks dsg_predict $QUICK --fit-svc-only --svc-cache "$SVC" >/tmp/svc.log 2>&1 &
  svc_pid=$!
fi

step "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python -c "import torch, numpy, scipy, sklearn; print('torch', torch.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__)"
} >>"$LOG" 2>&1
step "tests"
timeout 90 python -m pytest -q -p no:cacheprovider tests/test_torch_backend.py >>"$LOG" 2>&1
if [ "$MATVEC" = 1 ]; then
  step "perf/gpu"
  timeout 60 python -m benchmarks gpu $QUICK --device "$DEVICE" --out-dir "$OUT" >>"$LOG" 2>&1
fi

STREAM_ARGS=${STREAM_ARGS:---t0 10000 --precond-ridge 1e-6 --block-size 8192 --batch-size 32768}
best=$STREAM_ARGS
if [ -n "$STUDY" ]; then
  IFS=';' read -ra settings <<<"$STUDY"
  for setting in "${settings[@]}"; do
    step "validation study: $setting"
    timeout $((STUDY_S + 50)) python -m benchmarks dsg_stream $QUICK --device "$DEVICE" --workers 6 \
      --validation $setting --until "$STUDY_UNTIL" --budget-s "$STUDY_S" --state-dir "/tmp/dsg-study-${setting//[^a-z0-9.]/_}" \
      --out-dir "$OUT" >>"$LOG" 2>&1
  done
  best=$(python -m benchmarks dsg_stream --best-setting "$OUT/dsg-stream-$DEVICE-validation${QUICK:+-quick}.json" 2>>"$LOG") \
    || best=$STREAM_ARGS
fi

STATE_DIR=${STATE_DIR:-/tmp/dsg-stream-${best//[^a-z0-9.]/_}}  # one state per setting
stream_s=$((SECONDS_TOTAL - SECONDS - (PREDICT == 1 ? 130 : 10)))
if [ "$stream_s" -gt 30 ]; then
  step "stream for $stream_s s: $best"
  python -m benchmarks dsg_stream $QUICK --device "$DEVICE" --workers 6 --budget-s "$stream_s" $best \
    --until "$UNTIL" --state-dir "$STATE_DIR" --out-dir "$OUT" --profile "$OUT/stream-profile.txt" >>"$LOG" 2>&1
fi

[ "$PREDICT" = 1 ] || { step "done"; exit 0; }
wait "$svc_pid"
step "predict (SVC fit log follows)"
cat /tmp/svc.log >>"$LOG"
timeout 120 python -m benchmarks dsg_predict $QUICK --devices "$DEVICE" --repeats 2 --svc-cache "$SVC" \
  --out-dir "$OUT" >>"$LOG" 2>&1
step "done"
