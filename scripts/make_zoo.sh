#!/usr/bin/env bash
# Remakes the fixture zoo (test/Zoo/Models): a venv with a current torch, transformers and
# onnxscript from PyPI (about 6 GB, minutes, made once), then scripts/make_zoo.py. Run by
# developers when the exporters or the families change; CI uses the committed files.
# Usage: scripts/make_zoo.sh [FAMILY ...]   (VENV=path picks the venv, default .zoo-venv)
#        scripts/make_zoo.sh --venv-only     (the venv alone, for scripts/export_hf.py)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.zoo-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch transformers onnxscript onnx safetensors
fi
[[ "${1:-}" == "--venv-only" ]] && exit 0
"$venv/bin/python" "$root/scripts/make_zoo.py" "$root/test/Zoo/Models" "$@"
