"""Same input and seed, same result: the thematic run's output, byte for byte, against a saved reference.

Written for the refactor of ``pipelines/thematic/run.py`` into a loop of stages (issue 26, item 4): capture the
results on the code before a change, then compare after it. Only wall-clock values are left out (the values of
``run.timings_seconds``, ``edits[].at``); everything else, key order included, is compared as the bytes the platform stores
(``json.dumps(result, separators=(",", ":"), ensure_ascii=False)``, shared/runtime/child.py).

    .venv/bin/python bench/stage_parity.py capture DIR   # on the reference code
    .venv/bin/python bench/stage_parity.py compare DIR   # on the changed code; exit 1 on any difference

The cases cover every branch of the run: the bundled sample (metadata, no LLM), a fan-out sized input (the
embed map stage on the in-process fake context), metadata + breakdown_by + score + sentiment_from and then a
second wave with compare_to (inherit and discover), a 3-text input, a codebook (seed_themes) coded by embedding
and by a fake LLM followed by a codebook edit, and the LLM describe/merge/sentiment path with a fake LLM.
"""

from __future__ import annotations

import csv
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The repository, not bench/ (whose platform.py would shadow the standard library's).
sys.path[0] = str(ROOT)

from pipelines.thematic import PIPELINE, ThematicParams  # noqa: E402
from pipelines.thematic.baseline import baseline_of  # noqa: E402
from pipelines.thematic.edit import edit_result  # noqa: E402
from pipelines.thematic.run import run_with  # noqa: E402
from tests.support.thematic_data import feedback  # noqa: E402
from tests.support.thematic_fakes import FakeContext, FakeLLM  # noqa: E402

EARLIER = "a" * 28


def _sample() -> list[dict[str, Any]]:
    with (ROOT / "samples" / "feedback.csv").open(newline="", encoding="utf-8") as f:
        return [{"id": r["id"], "text": r["text"], "metadata": {"channel": r["channel"], "plan": r["plan"]}}
                for r in csv.DictReader(f)]


def _with_metadata(seed: int) -> list[dict[str, Any]]:
    items, truth = feedback(per_theme=30, seed=seed)
    rng = random.Random(seed)
    for it, t in zip(items, truth, strict=True):
        nps = rng.randint(0, 6) if t == "delivery" else rng.randint(5, 10)
        it["metadata"] = {"plan": rng.choice(["pro", "free"]), "nps": nps, "stars": rng.randint(1, 5)}
    return items


def _go(params: ThematicParams, data: Any, *, client: Any = None, ctx: FakeContext | None = None) -> dict[str, Any]:
    return run_with(ctx or FakeContext(), params, data, client=client)


def _validated(items: list[dict[str, Any]]) -> Any:
    return PIPELINE.validate_input(items)


def case_sample() -> dict[str, Any]:
    return _go(ThematicParams(llm="off", breakdown_by=["plan"]), _validated(_sample()))


def case_fanout() -> dict[str, Any]:
    items, _ = feedback(per_theme=25, seed=11)
    params = ThematicParams(llm="off", min_theme_size=5, fanout_min_responses=40, fanout_chunk_size=32)
    return _go(params, _validated(items), ctx=FakeContext(params=params))


def _wave1() -> dict[str, Any]:
    params = ThematicParams(llm="off", min_theme_size=8, breakdown_by=["plan", "nps"],
                           score={"key": "nps", "scale": "nps"}, sentiment_from="stars")
    return _go(params, _validated(_with_metadata(3)))


def case_metadata() -> dict[str, Any]:
    return _wave1()


def _wave2(mode: str) -> dict[str, Any]:
    first = _wave1()
    params = ThematicParams(llm="off", min_theme_size=8, breakdown_by=["plan"], score={"key": "nps"},
                            compare_to=EARLIER, compare_mode=mode)
    data = {"responses": _validated(_with_metadata(4)), "baseline": baseline_of(EARLIER, first)}
    return _go(params, data)


def case_compare_inherit() -> dict[str, Any]:
    return _wave2("inherit")


def case_compare_discover() -> dict[str, Any]:
    return _wave2("discover")


def case_compare_without_instrument() -> dict[str, Any]:
    first = _wave1()
    first.pop("instrument")
    params = ThematicParams(llm="off", min_theme_size=8, compare_to=EARLIER)
    data = {"responses": _validated(_with_metadata(5)), "baseline": baseline_of(EARLIER, first)}
    return _go(params, data)


def case_tiny() -> dict[str, Any]:
    items = [{"id": 1, "text": "The delivery was late again"}, {"id": 2, "text": "Great app, love the design"},
             {"id": 3, "text": "Refund took three weeks to arrive"}]
    return _go(ThematicParams(llm="off"), _validated(items))


def case_codebook_and_edit() -> dict[str, Any]:
    items, _ = feedback(per_theme=12, seed=5)
    book = [{"name": "Delivery", "description": "parcels arriving late"},
            {"name": "Pricing", "description": "prices and fees", "keywords": ["price", "fee"]}]
    params = ThematicParams(llm="auto", min_theme_size=3, seed_themes=book, multi_label=True)
    llm = FakeLLM(code={"parcel": "Delivery", "price": "Pricing"})
    doc = _go(params, _validated(items), client=llm)
    plain = _go(ThematicParams(llm="off", min_theme_size=3, seed_themes=book), _validated(items))
    a, b = doc["themes"][0]["id"], doc["themes"][1]["id"]
    edited = edit_result(doc, {"edits": [{"op": "merge", "themes": [a, b], "label": "Both"}]}, items)
    return {"llm": doc, "embedding": plain, "edited": edited}


def case_llm() -> dict[str, Any]:
    items, _ = feedback(per_theme=15, seed=2)
    items[0]["text"] += " Contact me at jane@example.com"
    first = _go(ThematicParams(llm="auto", min_theme_size=3), _validated(items), client=FakeLLM())
    ids = [t["id"] for t in first["themes"]]
    merged = _go(ThematicParams(llm="auto", min_theme_size=3, sentiment="llm"), _validated(items),
                 client=FakeLLM(merge=[ids[:2]]))
    spent = _go(ThematicParams(llm="auto", min_theme_size=3, sentiment="llm"), _validated(items),
                client=FakeLLM(fail_after=2))
    return {"labelled": first, "merged": merged, "budget_spent": spent}


def case_resumed() -> dict[str, Any]:
    """A retry that restores every stage from checkpoints returns what the first attempt did."""
    items, _ = feedback(per_theme=10, seed=9)
    params = ThematicParams(llm="off", min_theme_size=3)
    ctx = FakeContext()
    _go(params, _validated(items), ctx=ctx)
    return _go(params, _validated(items), ctx=FakeContext(checkpoints=ctx.checkpoints))


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    name[5:]: fn for name, fn in globals().items() if name.startswith("case_") and callable(fn)
}


def _strip_timings(doc: Any) -> Any:
    if isinstance(doc, dict):
        if "run" in doc and isinstance(doc["run"], dict) and "timings_seconds" in doc["run"]:
            doc = {**doc, "run": {**doc["run"], "timings_seconds": list(doc["run"]["timings_seconds"])}}
        if doc.get("edits"):
            # An edit's "at" is the wall clock when it was applied.
            doc = {**doc, "edits": [{k: v for k, v in e.items() if k != "at"} for e in doc["edits"]]}
        return {k: _strip_timings(v) if k in ("llm", "embedding", "edited", "labelled", "merged",
                                               "budget_spent") else v for k, v in doc.items()}
    return doc


def stored_bytes(doc: dict[str, Any]) -> bytes:
    """What the platform stores, with the timing values (not their stage names) left out."""
    return json.dumps(_strip_timings(doc), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("capture", "compare"):
        print(__doc__)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    only = set(argv[2:])
    bad = 0
    for name, fn in CASES.items():
        if only and name not in only:
            continue
        got = stored_bytes(fn())
        path = out / f"{name}.json"
        if argv[0] == "capture":
            path.write_bytes(got)
            print(f"{name}: saved {len(got)} bytes")
            continue
        want = path.read_bytes()
        same = got == want
        bad += not same
        print(f"{name}: {'identical' if same else 'DIFFERENT'} ({len(got)} vs {len(want)} bytes)")
        if not same:
            n = next(i for i, (x, y) in enumerate(zip(got, want, strict=False)) if x != y) if got[:1] else 0
            print(f"  first difference at byte {n}: now {got[max(0, n - 80):n + 80]!r}\n  was {want[max(0, n - 80):n + 80]!r}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
