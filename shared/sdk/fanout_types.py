"""The values ``ctx.map`` deals in, kept free of storage imports so a pipeline process loads them cheaply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Suspend(BaseException):
    """Raised by ``ctx.map`` when the chunks are not done yet. BaseException, so a
    pipeline's ``except Exception`` cannot swallow it."""

    def __init__(self, stage: str, chunks: int) -> None:
        super().__init__(stage)
        self.stage = stage
        self.chunks = chunks


@dataclass(frozen=True)
class MapResult:
    """What ``ctx.map`` returns once every chunk has finished.

    ``outputs`` has one entry per chunk, in order (``None`` for a chunk that
    failed within the error budget); ``skipped`` says which chunks were
    skipped, how many items they held and why, so the result can list them.
    """

    outputs: list[Any]
    chunk_sizes: list[int]
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def flat(self) -> list[Any]:
        """Per-item outputs in input order, ``None`` for the items of skipped chunks (for list outputs)."""
        out: list[Any] = []
        for size, chunk in zip(self.chunk_sizes, self.outputs, strict=True):
            out.extend(chunk if chunk is not None else [None] * size)
        return out
