"""``python -m pipelines.thematic.build_models [--if-installed] [minilm|mpnet ...]``: build the int8 encoders.

Writes into ``pipelines/thematic/assets/models/`` (run by ``scripts/bootstrap``
and before packaging a deployment); see ``models.py``.
"""

from __future__ import annotations

import sys

from .models import main

if __name__ == "__main__":
    raise SystemExit(main(["build", *sys.argv[1:]]))
