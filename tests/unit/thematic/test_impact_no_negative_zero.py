"""A theme whose mean score is exactly 0 is stored as 0.0, never -0.0 (review46u).

On the drugs.com reviews (rating as -1/0/+1, ``score`` numeric) the theme "Yeast infection" had 3 positive, 2 neutral
and 3 negative reviews: its mean is 0, but the impact table read ``-0.00`` (the JSON held ``-0.0``) while the
Sentiment table of the same report read ``+0.00``. The score is computed about the overall mean (a sum less its
mean, plus the mean back), which leaves a rounding residue of -1e-17; rounded to 4 places that is -0.0.
"""

from __future__ import annotations

import json
import math

from pipelines.thematic.impact import impact


def test_a_zero_mean_theme_scores_plus_zero() -> None:
    # Theme a: +1, +1, 0, 0, -1, -1 (mean exactly 0); theme b lifts the overall mean off 0.
    values = [1, 1, 0, 0, -1, -1, 1, 0, 0, 0]
    themes_of = [["a"]] * 6 + [["b"]] * 4
    doc = impact(values, themes_of, [{"id": "a"}, {"id": "b"}], key="rating", scale="numeric")
    a = next(t for t in doc["themes"] if t["theme_id"] == "a")
    assert a["score"] == 0
    assert math.copysign(1.0, a["score"]) == 1.0, a
    assert '"score": -0.0' not in json.dumps(doc)
