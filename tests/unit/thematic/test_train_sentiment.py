"""Issue 23: the sentiment classifier's training data and fit (pipelines/thematic/train_sentiment.py), without the
encoder or the data packages: how rated snippets become labels, and that every built graph's vectors are stacked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipelines.thematic import train_sentiment as T
from pipelines.thematic.models import SPECS


def test_a_mean_rating_is_neutral_within_half_a_step_of_zero() -> None:
    # Hand values on VADER's -4..+4 scale: the band is open, so exactly +-0.5 is still neutral.
    assert [T.rated_label(v) for v in (-2.3, -0.51, -0.5, 0.0, 0.5, 0.51, 3.1)] == [
        "negative", "negative", "neutral", "neutral", "neutral", "positive", "positive"]


def test_product_snippets_are_read_in_place_with_a_tab_in_the_text_kept(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "amazon.txt"
    f.write_text("id\tsentiment\ttext\n1_1\t-1.4\tthe zoom broke\tagain\n1_2\t0.2\tit is a camera\n"
                 "1_3\t2.6\tlove it\n1_4\t0.9\t \n", encoding="utf-8")
    monkeypatch.setattr(T, "package_file", lambda *_: f)
    assert T.products() == [("the zoom broke\tagain", "negative"), ("it is a camera", "neutral"),
                            ("love it", "positive")]


def test_the_fit_stacks_the_vectors_of_every_built_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A job's vectors come from whichever graph its CPU chose: the weights must be fitted on all of them.
    assert T.GRAPHS == tuple(g.key for g in SPECS["minilm"].graphs) and len(T.GRAPHS) >= 2
    texts, labels = ["good", "bad", "meh"], ["positive", "negative", "neutral"]
    monkeypatch.setattr(T, "corpus", lambda: (texts, labels))
    asked: list[str | None] = []

    def fake_embed(t: list[str], cache: Path | None, graph: str | None = None) -> Any:
        asked.append(graph)
        return np.eye(3, 384, dtype=np.float32) * (1.0 + len(asked))

    seen: dict[str, Any] = {}

    def fake_fit(emb: Any, y: list[str], c: float = 1.0) -> dict[str, Any]:
        seen["rows"], seen["labels"] = emb.shape[0], y
        return {"coef": np.zeros((3, 384)), "intercept": np.zeros(3)}

    monkeypatch.setattr(T, "embed", fake_embed)
    monkeypatch.setattr(T, "fit", fake_fit)
    out = tmp_path / "w.json"
    assert T.main(["--out", str(out)]) == 0
    assert asked == list(T.GRAPHS)
    assert seen["rows"] == 3 * len(T.GRAPHS) and seen["labels"] == labels * len(T.GRAPHS)
    assert '"graphs":["int8","int8-vnni"]' in out.read_text()
    with pytest.raises(SystemExit, match="unknown"):
        T.main(["--out", str(out), "--graphs", "int8,fp64"])
