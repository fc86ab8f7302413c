#!/usr/bin/env bash
# GPU throughput of the torch backend on a lent NVIDIA machine (image: python3 with CUDA torch,
# numpy, transformers, huggingface_hub; no network). Run from the repository root with the wheels
# of benchmarks/gpu_device_wheels.txt in .whl/ (gitignored; the file says how to fetch them):
#
#   bash benchmarks/gpu_device.sh             # on the GPU machine: ~3.5 min, table on stdout
#   bash benchmarks/gpu_device.sh --dry-run   # anywhere: tiny sizes on CPU
#
# The rehearsed torch layout: with GPU_DEVICE_MODEL_DIR set to a directory that
#   python -m speech rehearse --stack-dir examples --stack gpu --weights-out out/gpu-weights
# kept (the weight-cache build's output: config.json, kokoro-v1_0.pth, voices/*.pt, MANIFEST.sha256;
# carry it to the device), every side serves exactly that directory; without it the benchmark writes
# the same layout itself (same random architecture, same 2 frames per phoneme).
# One run compares, on the same machine: one request at a time (baseline), the in-process
# TORCH_STREAMS layout, and TORCH_WORKERS=4 and 8 (spawned processes, a model copy each). Writes
# to $OUT (default out/gpu): gpu_throughput.md/.json, gpu_throughput.partial.json (rows so far,
# kept if the run is cut short), env.txt, log.txt.
# Worker processes are spawned: they get the parent's sys.path (so /tmp/site and the repo) and
# its interpreter flags (-S included), and PYTHONPATH is exported for them as well.
# Dry run on a machine whose python cannot install the cp312 wheels: install them elsewhere and
# point GPU_DEVICE_SITE at that folder (the install step is then skipped); GPU_DEVICE_PYTHON
# picks the interpreter and its flags (default python3).
if [ -z "${GPU_DEVICE_SITE:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || { echo "gpu_device.sh: installing .whl/*.whl failed (carry .whl?)" >&2; exit 2; }
else
  export PYTHONPATH="$GPU_DEVICE_SITE:$PWD"
fi
set -uo pipefail
read -ra PY <<< "${GPU_DEVICE_PYTHON:-python3}"
OUT="${OUT:-out/gpu}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
start=$(date +%s)

if [ "${1:-}" = "--dry-run" ]; then
  MAIN=(--tiny --device cpu --workers 2); T_MAIN=400
else
  # Model build ~10 s, in-process load + 4 + 8 workers loading in parallel ~40 s; 5 levels x 4
  # sides x 6 s = 120 s plus tails (baseline at c=32: ~3 s) ~20 s: ~3.2 min. Cut at 250 s so the
  # whole script stays under 4.5 min; the partial JSON keeps the levels done by then.
  MAIN=(--levels 1,4,8,16,32 --seconds 6 --workers 4,8); T_MAIN=250
fi

{
  echo "date: $(date -u +%FT%TZ)  host: $(uname -srm)  cpus: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | head -2
  "${PY[@]}" - <<'EOF' 2>&1
import importlib, sys
import torch
print(f"python {sys.version.split()[0]}  torch {torch.__version__}  cuda {torch.version.cuda}  gpu {torch.cuda.is_available()}")
missing = []
for m in ("numpy", "pydantic", "pydantic_settings", "loguru", "transformers", "misaki.espeak",
          "espeakng_loader", "phonemizer", "container.engine"):
    try:
        importlib.import_module(m)
    except Exception as e:
        missing.append(f"{m}: {type(e).__name__}: {e}")
try:
    from container.backends.torch_backend import _import_kmodel
    _import_kmodel()
except Exception as e:
    missing.append(f"kokoro.model: {type(e).__name__}: {e}")
try:
    import pynvml  # noqa: F401  (GPU utilization; optional, nvidia-smi is the fallback)
    print("pynvml: yes")
except ImportError:
    print("pynvml: no (nvidia-smi fallback)")
print("imports: ok" if not missing else "MISSING:\n  " + "\n  ".join(missing))
sys.exit(1 if missing else 0)
EOF
} 2>&1 | tee "$OUT/env.txt"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "gpu_device.sh: imports missing (see above)" >&2; exit 1; }

if [ -n "${GPU_DEVICE_MODEL_DIR:-}" ]; then
  [ -f "$GPU_DEVICE_MODEL_DIR/config.json" ] || { echo "gpu_device.sh: GPU_DEVICE_MODEL_DIR=$GPU_DEVICE_MODEL_DIR has no config.json (make it with speech rehearse --weights-out)" >&2; exit 2; }
  MAIN+=(--model-dir "$GPU_DEVICE_MODEL_DIR")
  echo "model: $GPU_DEVICE_MODEL_DIR ($(wc -l < "$GPU_DEVICE_MODEL_DIR/MANIFEST.sha256" 2>/dev/null || echo '?') files in its manifest)" | tee -a "$OUT/env.txt"
fi
timeout "$T_MAIN" "${PY[@]}" benchmarks/gpu_throughput.py "${MAIN[@]}" --out-dir "$OUT" 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "gpu_device.sh: main run failed (exit $rc; 124 = ran past ${T_MAIN}s; rows so far in $OUT/gpu_throughput.partial.json)" >&2; exit 1; }
# Separate processes time-slice one GPU unless NVIDIA MPS lets their kernels run side by side: the
# same worker sides once more under an MPS daemon, when the binary is there and time is left.
if [ "${1:-}" != "--dry-run" ] && command -v nvidia-cuda-mps-control >/dev/null && [ $(( $(date +%s) - start )) -lt 270 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    echo; echo "--- under NVIDIA MPS: levels 8,32"
    timeout 100 "${PY[@]}" benchmarks/gpu_throughput.py --levels 8,32 --seconds 5 --workers 4,8 \
      ${GPU_DEVICE_MODEL_DIR:+--model-dir "$GPU_DEVICE_MODEL_DIR"} --out-dir "$OUT/mps" 2>&1 \
      | tee -a "$OUT/log.txt" || echo "gpu_device.sh: the MPS run did not finish (the main table stands)"
    echo quit | nvidia-cuda-mps-control
  else
    echo "gpu_device.sh: nvidia-cuda-mps-control -d failed; no MPS run"
  fi
fi
echo "gpu_device.sh: done in $(( $(date +%s) - start )) s; files in $OUT"
