"""In-memory fakes of the platform context and the LLM client for the thematic unit tests."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from shared.core.errors import Cancelled
from shared.sdk.fanout_types import MapResult, Suspend


class FakeContext:
    """A PipelineContext that keeps checkpoints, progress and usage in memory."""

    def __init__(
        self,
        checkpoints: dict[str, bytes] | None = None,
        cancel_after_progress: int | None = None,
        *,
        params: Any = None,
        suspend: bool = False,
        fail_checkpoint_after: int | None = None,
    ) -> None:
        self.job_id = "job1"
        self.tenant = "t"
        self.attempt = 1
        self.logger = logging.getLogger("fake")
        self.checkpoints: dict[str, bytes] = checkpoints if checkpoints is not None else {}
        self.progress_calls: list[tuple[str, int, int | None, str]] = []
        self.usage_counters: dict[str, float] = {}
        self.cancel_after_progress = cancel_after_progress
        #: The job's params, handed to map functions as the chunk worker would.
        self.params = params
        #: Like the platform: the first ``map`` of a stage runs its chunks and
        #: raises :class:`Suspend`; the re-run (same context) gets the outputs.
        self.suspend = suspend
        self.map_outputs: dict[str, MapResult] = {}
        #: stage → [(chunk index, items)] of every chunk run.
        self.map_calls: dict[str, list[tuple[int, int]]] = {}
        #: Simulates a crash: the N+1-th checkpoint write raises.
        self.fail_checkpoint_after = fail_checkpoint_after
        self.checkpoint_writes = 0

    def progress(self, stage: str, processed: int = 0, total: int | None = None, message: str = "") -> None:
        self.progress_calls.append((stage, processed, total, message))

    def cancelled(self) -> bool:
        return self.cancel_after_progress is not None and len(self.progress_calls) >= self.cancel_after_progress

    def raise_if_cancelled(self) -> None:
        if self.cancelled():
            raise Cancelled("cancelled")

    def checkpoint(self, name: str, data: bytes) -> None:
        if self.fail_checkpoint_after is not None and self.checkpoint_writes >= self.fail_checkpoint_after:
            raise RuntimeError("worker died")
        self.checkpoint_writes += 1
        self.checkpoints[name] = data

    def restore(self, name: str) -> bytes | None:
        return self.checkpoints.get(name)

    def usage(self, **counters: float) -> None:
        for k, v in counters.items():
            self.usage_counters[k] = self.usage_counters.get(k, 0) + v

    def map(
        self, stage: str, items: list[Any], fn: Callable[..., Any], *, chunk_size: int | None = None,
        error_budget: float = 0.0,
    ) -> MapResult:
        """Runs the chunks in this process, in order, with the params given at construction."""
        if stage in self.map_outputs:
            return self.map_outputs[stage]
        size = chunk_size or max(1, len(items))
        outputs, sizes = [], []
        for n, start in enumerate(range(0, len(items), size)):
            part = items[start : start + size]
            # JSON round trip: a chunk worker only ever sees what JSON carries.
            part = json.loads(json.dumps(part))
            outputs.append(fn(self, self.params, part))
            sizes.append(len(part))
            self.map_calls.setdefault(stage, []).append((n, len(part)))
        result = MapResult(outputs, sizes)
        self.map_outputs[stage] = result
        if self.suspend:
            raise Suspend(stage, len(outputs))
        return result


@dataclass
class FakeUsage:
    prompt_tokens: int = 100
    completion_tokens: int = 20
    cost_usd: float = 0.001


@dataclass
class FakeResult:
    value: Any
    usage: FakeUsage = field(default_factory=FakeUsage)
    cached: bool = False


class FakeLLM:
    """Answers by purpose with canned logic; records every prompt sent."""

    model_name = "fake-gpt"

    def __init__(self, merge: list[list[str]] | None = None, fail_after: int | None = None,
                 code: dict[str, list[str]] | None = None) -> None:
        self.calls: list[tuple[str, list[dict[str, str]]]] = []
        self.merge = merge or []
        self.fail_after = fail_after
        self.code = code or {}

    def complete_json(self, messages: list[dict[str, str]], schema: type[BaseModel], *, max_tokens: int = 800,
                      purpose: str = "") -> FakeResult:
        from shared.llm.client import LLMBudgetExhausted

        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise LLMBudgetExhausted("budget spent")
        self.calls.append((purpose, messages))
        body = json.loads(messages[-1]["content"])
        if purpose == "thematic.label":
            kw = body["keywords"][0] if body["keywords"] else "misc"
            return FakeResult(schema.model_validate({"label": f"About {kw}", "description": f"People talk about {kw}."}))
        if purpose == "thematic.merge":
            return FakeResult(schema.model_validate({"merge": self.merge}))
        if purpose == "thematic.sentiment":
            # Canned: "great"/"helpful" positive, "late"/"crash" negative, the rest neutral.
            def label(text: str) -> str:
                t = text.lower()
                return "positive" if ("great" in t or "helpful" in t) else (
                    "negative" if ("late" in t or "crash" in t) else "neutral")
            return FakeResult(schema.model_validate(
                {"responses": [{"id": r["id"], "label": label(r["text"])} for r in body["responses"]]}))
        if purpose == "thematic.code":
            out = []
            for r in body["responses"]:
                codes = [name for word, name in self.code.items() for _ in [0] if word in r["text"].lower()]
                out.append({"id": r["id"], "codes": codes})
            return FakeResult(schema.model_validate({"responses": out}))
        raise AssertionError(purpose)
