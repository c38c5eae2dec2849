"""The thematic admission estimate (``pipelines.thematic.memory_mb``) against what was measured (issue 27).

bench/embed_sessions.py --rss (fresh processes, 2026-12-07, Intel Xeon with AVX-512 VNNI): the fast encoder's two
sessions on one copy of the weights peak at 239 MiB (VNNI graph) / 271 MiB (the default int8 graph) embedding 2,000
BBC leads, against 286 / 314 when each session had its own weights; one session of 2 threads 199 / 213. The
quality encoder (all-mpnet-base-v2 int8, two sessions, shared weights) peaks at 780 MiB on 500 leads.
"""

from __future__ import annotations

from pipelines.thematic import BASE_MB, PIPELINE, QUALITY_EXTRA_MB, ThematicParams

MEASURED_FAST_PEAK_MIB = {"int8-vnni": 239.1, "int8": 270.6}  # 2 sessions, shared weights, 2,000 leads
MEASURED_QUALITY_PEAK_MIB = 781.8  # 2 sessions, shared weights, 500 leads
LEAD = "x" * 130  # a BBC lead's length


def estimate(params: ThematicParams | None, n: int) -> float:
    assert PIPELINE.memory_mb is not None
    return PIPELINE.memory_mb(params, [{"text": LEAD} for _ in range(n)])


def test_the_base_is_one_process_with_two_sessions_on_one_copy_of_the_weights() -> None:
    # 330 while the sessions shared nothing (the second one added 79 MiB): now 250 + the larger graph's +57.
    assert BASE_MB == estimate(None, 0) == estimate(ThematicParams(), 0) == 310.0
    assert estimate(None, 2000) >= max(MEASURED_FAST_PEAK_MIB.values())


def test_the_quality_encoder_adds_its_larger_graph() -> None:
    quality = ThematicParams(embedding="quality")
    assert estimate(quality, 0) == BASE_MB + QUALITY_EXTRA_MB
    assert estimate(quality, 500) >= MEASURED_QUALITY_PEAK_MIB
    assert estimate(quality, 2000) - estimate(ThematicParams(), 2000) == QUALITY_EXTRA_MB
    assert estimate(ThematicParams(embedding="multilingual"), 10) == estimate(None, 10)
