#!/bin/bash
# Issue 50's device check: what a lent GPU machine runs (benchmarks/gpu.py within BUDGET seconds).
# Here first: `make gpu-prepare` (wheels into .whl/, datasets into .gpu-data/); the device call
# carries both. Usage: bash benchmarks/gpu_check.sh [BUDGET]   (default 420 s)
# Writes $OUT/gpu.json, $OUT/gpu.log and $OUT/gpu-logs.tar.gz (every subprocess's log, the run's
# metrics); without $OUT, /tmp/gpu.json and the logs in /tmp/gpu-work/logs.
cd "$(dirname "$0")/.." || exit 1
BUDGET=${1:-420}
WORK=/tmp/gpu-work
mkdir -p "$WORK/logs"
nvidia-smi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site SEQLAB_DATA_DIR=$PWD/.gpu-data SEQLAB_OFFLINE=1 PYTHONUNBUFFERED=1
if compgen -G ".gpu-data/fsdd/recordings/*.flac" >/dev/null; then
    python3 benchmarks/fsdd_flac.py unpack .gpu-data/fsdd || exit 1
fi
# CTranslate2 loads CUDA 12's cuBLAS by name: let it find the copy PyTorch's wheels bring, if any
for d in $(python3 -c 'import nvidia, os; print(*[os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)])' 2>/dev/null); do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
timeout -s INT $((BUDGET + 60)) python3 benchmarks/gpu.py --out "${OUT:-/tmp}/gpu.json" \
    --budget "$BUDGET" --workdir "$WORK" 2>&1 | tee "$WORK/logs/gpu.log"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ]; then
    cp "$WORK/logs/gpu.log" "$OUT/"
    tar czf "$OUT/gpu-logs.tar.gz" -C "$WORK" logs
fi
exit "$rc"
