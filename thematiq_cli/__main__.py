"""``python -m thematiq_cli`` runs the CLI without the console script installed."""

from __future__ import annotations

from .main import main

main()
