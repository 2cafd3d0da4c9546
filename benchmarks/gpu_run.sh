#!/usr/bin/env bash
# The GPU measurements (issue #17) in one command, on a machine with a CUDA GPU, torch and numba:
#
#   bash benchmarks/gpu_run.sh OUT_DIR [SECONDS] [UNTIL]
#
# in the checkout's root, with the datasets mnist and adult where kernelscale finds them
# (KERNELSCALE_DATA). Within about SECONDS of wall time (default 540) it runs, logging each step
# to OUT_DIR/*.log and writing results there:
#   1. the torch backend's tests, the GPU ones included (tests/test_torch_backend.py);
#   2. bench_gpu.py: kernel_matvec against torch's GEMM on the GPU (gpu-matvec.json);
#   3. bench_dsg_stream.py --device cuda: the virtual-digit stream up to UNTIL examples (default
#      8.1M), for the time left after 130 s are set aside for step 4; resumable from
#      STATE_DIR (default /tmp/dsg-stream) when run again on the same machine;
#   4. bench_dsg_predict.py --devices cuda: adult predictions on the GPU against LIBSVM's, whose
#      SVC is fitted in the background during steps 1-3 (dsg-predict-cuda.json).
# A dry run without a GPU: DEVICE=cpu QUICK=--quick bash benchmarks/gpu_run.sh /tmp/dry 200 20000
set -u
OUT=${1:?usage: gpu_run.sh OUT_DIR [SECONDS] [UNTIL]}
SECONDS_TOTAL=${2:-540}
UNTIL=${3:-8100000}
STATE_DIR=${STATE_DIR:-/tmp/dsg-stream}
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
SVC=/tmp/kernelscale-adult-svc.joblib

python benchmarks/bench_dsg_predict.py $QUICK --fit-svc-only --svc-cache "$SVC" >"$OUT/svc.log" 2>&1 &
svc_pid=$!

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python -c "import torch, numpy, scipy, sklearn; print('torch', torch.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__)"
  timeout 120 python -m pytest -q -p no:cacheprovider tests/test_torch_backend.py 2>&1
} >"$OUT/tests.log" 2>&1

timeout 60 python benchmarks/bench_gpu.py $QUICK --device "$DEVICE" --out-dir "$OUT" >"$OUT/bench-gpu.log" 2>&1

stream_s=$((SECONDS_TOTAL - SECONDS - 130))
if [ "$stream_s" -gt 30 ]; then
  python benchmarks/bench_dsg_stream.py $QUICK --device "$DEVICE" --workers 6 --budget-s "$stream_s" --until "$UNTIL" \
    --state-dir "$STATE_DIR" --out-dir "$OUT" >"$OUT/stream.log" 2>&1
fi

wait "$svc_pid"
timeout 120 python benchmarks/bench_dsg_predict.py $QUICK --devices "$DEVICE" --repeats 2 --svc-cache "$SVC" \
  --out-dir "$OUT" >"$OUT/predict.log" 2>&1
echo "done in $SECONDS s" >>"$OUT/tests.log"
