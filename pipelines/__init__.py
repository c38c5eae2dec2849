"""Pipelines shipped with Thematiq. Each module exports ``PIPELINE`` (see ``shared.sdk.pipeline``)."""
