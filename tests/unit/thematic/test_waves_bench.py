"""bench/waves.py's design: its power calculation against hand-computed values, and a draw that plants the x2
change only on a label with enough answers for it (docs/thematic.md, "Waves": the power of the design)."""

from __future__ import annotations

import math

import pytest

from tests.support.bench import load_bench


def test_the_power_of_the_old_design_matches_the_hand_computed_values() -> None:
    # 30 intents x 40: n1 = 1200, n2 = 28 * 40 + 8 + 80 = 1208. x2: p1 = 40/1200 = 0.033333, p2 = 80/1208 =
    # 0.066225, pooled 120/2408 = 0.049834, se0 = sqrt(0.049834 * 0.950166 * (1/1200 + 1/1208)) = 0.0088689,
    # z = 0.032892 / 0.0088689 = 3.7087; se1 = sqrt(p1 q1 / n1 + p2 q2 / n2) = 0.0088342. BH at rank 2 of 67:
    # two-sided p < 0.1 / 67. Power = Phi((3.7087 - z_crit) * se0 / se1) = Phi(0.5341) = 0.703.
    # -80 %: p2 = 8/1208 = 0.0066225, pooled 48/2408 = 0.019934, se0 = 0.0056969, z = 0.026711 / 0.0056969 = 4.6887 at rank 1.
    w = load_bench("waves")
    out = w.power(30, 40, 67)
    assert (out["n1"], out["n2"]) == (1200, 1208)
    assert out["up"]["z"] == pytest.approx(3.71, abs=0.005)
    assert math.erfc(out["up"]["z_crit"] / math.sqrt(2)) == pytest.approx(0.1 / 67, rel=0.02)
    assert out["up"]["power"] == pytest.approx(0.703, abs=0.002)
    assert out["down"]["z"] == pytest.approx(4.69, abs=0.005)
    assert math.erfc(out["down"]["z_crit"] / math.sqrt(2)) == pytest.approx(0.05 / 67, rel=0.02)
    # The bench's design (70 an intent) has the headroom the old one lacked.
    assert w.power(30, 70, 67)["up"]["power"] > 0.95


def test_the_x2_change_goes_only_to_a_label_with_three_times_the_answers() -> None:
    w = load_bench("waves")
    texts = {f"small{i}": [f"s{i} {k}" for k in range(150)] for i in range(20)}
    texts |= {f"big{i}": [f"b{i} {k}" for k in range(220)] for i in range(12)}
    texts["tiny"] = [f"t {k}" for k in range(100)]  # fewer than 2 x 70: never drawn
    d = w.draw(texts, 0, 30, 70, 0)
    assert "tiny" not in d["kept"] and len(d["kept"]) == 30
    assert set(d["big"]) == {k for k in d["kept"] if k.startswith("big")} and d["big"]
    up = d["big"][0]
    wave = w.wave2(d, d["kept"][-1] if d["kept"][-1] != up else d["kept"][0], up, 70)
    assert sum(1 for _, lab in wave if lab == up) == 140


def test_the_sample_pool_is_its_eight_largest_single_themes_so_a_wave_has_answers() -> None:
    # Before, the pool held "unusable" and the one-row multi-topic labels ("a|b"), so --per (the smallest label's
    # size // 3) became 0 and wave 1 had no usable response: `--set sample` died in the clean stage.
    w = load_bench("waves")
    texts = w.pool("sample")
    assert len(texts) == 8
    assert all(k != "unusable" and "|" not in k for k in texts)
    assert min(len(v) for v in texts.values()) // 3 >= 8
