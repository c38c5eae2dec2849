#!/bin/sh
# azd prepackage hook (service api): the deployment package must carry what the build steps make, because none of
# it is in git and Azure's remote build installs requirements.txt only:
#
# * the built int8 encoders (both graphs: the CPU picks one at load time) and the tokenizer copied from the pinned
#   weights package, in pipelines/thematic/assets/models/. Without them the workers would fall back to the old,
#   ~2x slower model, or have no tokenizer (pipelines/thematic/models.py);
# * Swagger UI's files for /api/docs, in web/static/build/swagger-ui/, installed afresh from npm as pinned by
#   tools/swagger-ui/package-lock.json (blueprints/swagger_assets.py).
#
# So the package is refused here rather than shipped without them: each file is built (or its sha256 re-checked)
# from its pinned, hash-checked source, and must match.
#
# Needs the project's venv (scripts/bootstrap) and npm. .funcignore excludes neither folder.
set -eu
cd "$(dirname "$0")/../.."
py=${THEMATIQ_PYTHON:-.venv/bin/python}
if [ ! -x "$py" ]; then
  echo "prepackage: $py not found: run scripts/bootstrap first (it installs what builds the model)" >&2
  exit 1
fi
"$py" -m pipelines.thematic.build_models minilm
"$py" -m blueprints.swagger_assets --fresh
"$py" - <<'PY'
from pathlib import Path

from blueprints import swagger_assets
from pipelines.thematic.models import SPECS, _good, packaged_dir

spec = SPECS["minilm"]
shipped = [(packaged_dir() / g.file_name, g.sha256) for g in spec.graphs]
shipped.append((packaged_dir() / spec.tokenizer_name, spec.weights.tokenizer[2]))
for path, sha in shipped:
    if not _good(path, sha):
        raise SystemExit(f"prepackage: {path} is missing or does not match its pinned sha256")
    print(f"prepackage: {path.resolve().relative_to(Path.cwd().resolve())} ships with the package (sha256 checked)")
swagger_assets.load()  # raises unless every file matches the manifest and the manifest the lock
print(f"prepackage: {swagger_assets.build_dir().relative_to(Path.cwd().resolve())} ships with the package (sha256 checked)")
PY
