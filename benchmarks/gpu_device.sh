#!/usr/bin/env bash
# GPU throughput of the torch backend on a lent NVIDIA machine (image: python3 with CUDA torch,
# numpy, transformers, huggingface_hub; no network). Run from the repository root with the wheels
# of benchmarks/gpu_device_wheels.txt in .whl/ (gitignored; the file says how to fetch them):
#
#   bash benchmarks/gpu_device.sh             # on the GPU machine: ~3-4 min, table on stdout
#   bash benchmarks/gpu_device.sh --dry-run   # anywhere: tiny sizes on CPU, ~1 min
#
# Writes to $OUT (default out/gpu): gpu_throughput.md/.json (the main run), sweep/ (the same at
# TORCH_STREAMS=8, levels 8 and 32: is auto's 4 enough?), env.txt, log.txt.
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
  MAIN=(--tiny --device cpu); EXTRA=(--tiny --device cpu --streams 2 --levels 2); T_MAIN=240; T_EXTRA=120
else
  # 6 levels x 2 sides x 8 s plus tails: ~2.5 min; model build and warm-up ~30 s.
  MAIN=(--levels 1,2,4,8,16,32 --seconds 8); EXTRA=(--streams 8 --levels 8,32 --seconds 6); T_MAIN=240; T_EXTRA=75
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

timeout "$T_MAIN" "${PY[@]}" benchmarks/gpu_throughput.py "${MAIN[@]}" --out-dir "$OUT" 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "gpu_device.sh: main run failed (exit $rc; 124 = ran past ${T_MAIN}s)" >&2; exit 1; }

# The second run only while it fits well inside the six minutes a lead has for this script.
if [ $(( $(date +%s) - start )) -lt 230 ]; then
  echo; echo "--- TORCH_STREAMS sweep: ${EXTRA[*]}"
  timeout "$T_EXTRA" "${PY[@]}" benchmarks/gpu_throughput.py "${EXTRA[@]}" --out-dir "$OUT/sweep" 2>&1 \
    | tee -a "$OUT/log.txt" || echo "gpu_device.sh: streams sweep did not finish (the main table stands)"
else
  echo "gpu_device.sh: skipped the streams sweep ($(( $(date +%s) - start )) s used)"
fi
echo "gpu_device.sh: done in $(( $(date +%s) - start )) s; files in $OUT"
