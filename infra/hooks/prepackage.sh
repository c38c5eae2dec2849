#!/bin/sh
# azd prepackage hook (service api): the deployment package must carry the built int8 encoder.
#
# Azure's remote build installs requirements.txt only; it does not run our model build, and the run-time
# packages do not include what builds it (onnx, the pinned fp32 weights). Without the built file in
# pipelines/thematic/assets/models/ the workers would fall back to the old, ~2x slower model
# (pipelines/thematic/models.py). So the package is refused here rather than shipped slow:
# the file is built (or its sha256 re-checked) from the pinned, hash-checked weights, and must match.
#
# Needs the project's venv (scripts/bootstrap). .funcignore does not exclude the built file.
set -eu
cd "$(dirname "$0")/../.."
py=${THEMATIQ_PYTHON:-.venv/bin/python}
if [ ! -x "$py" ]; then
  echo "prepackage: $py not found: run scripts/bootstrap first (it installs what builds the model)" >&2
  exit 1
fi
"$py" -m pipelines.thematic.build_models minilm
"$py" - <<'PY'
from pathlib import Path

from pipelines.thematic.models import SPECS, _good, packaged_dir

spec = SPECS["minilm"]
path = packaged_dir() / spec.file_name
if not _good(path, spec.built_sha256):
    raise SystemExit(f"prepackage: {path} is missing or does not match its pinned sha256")
print(f"prepackage: {path.resolve().relative_to(Path.cwd().resolve())} ships with the package (sha256 checked)")
PY
