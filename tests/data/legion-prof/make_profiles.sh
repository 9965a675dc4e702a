#!/usr/bin/env bash
# Writes the Legion Prof profiles beside this script with the real Legate from PyPI (CPU only), as
# README.md says. Needs python3 with venv, a C compiler and PyPI; the tests read the committed
# files and need none of this.
#
#   bash tests/data/legion-prof/make_profiles.sh [WORK_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"

# The Legate wheels link the CUDA driver library: a stand-in whose cuInit says there is no device
# lets them start with --gpus 0. nvidia-cuda-runtime brings the libcudart each was built with.
gcc -shared -fPIC -Wall -o "$work/libcuda.so.1" "$here/cuda_stub.c"

profile() { # profile LEGATE_VERSION CUDA_RUNTIME LIB_SUBDIR SYSMEM_MIB FOLDER
  local venv="$work/venv-$1"
  [ -x "$venv/bin/legate" ] || {
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "legate==$1" "$2"
  }
  local lib="$venv/lib/python3.11/site-packages/nvidia/$3/lib"
  local logs="$work/$5"
  mkdir -p "$logs" "$here/$5"
  (cd "$work" && PATH="$venv/bin:$PATH" LD_LIBRARY_PATH="$work:$lib" \
      legate --gpus 0 --cpus 1 --sysmem "$4" --profile --logdir "$logs" "$here/train.py" \
      > "$logs/legate.log" 2>&1) || true
  cp "$logs/legate_0.prof" "$here/$5/legate_0.prof"
}
# Under pressure: instances collected and recreated.
profile 26.6.1 "nvidia-cuda-runtime>=13,<14" cu13 32 26.06/pressure
profile 25.3.2 "nvidia-cuda-runtime-cu12" cuda_runtime 32 25.03/pressure
# Out of memory: Legate's report in its log, and a profile that holds no instance records.
profile 26.6.1 "nvidia-cuda-runtime>=13,<14" cu13 16 26.06/oom
cp "$work/26.06/oom/legate.log" "$here/26.06/oom/legate.log"
ls -l "$here"/*/*
