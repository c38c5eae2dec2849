"""Stage 4: describe themes: keywords, representative quotes, labels; optional LLM labels and merge pass.

Without an LLM the label is built from c-TF-IDF keywords (never "cluster 3").
With one, each theme gets a short label and a one-sentence description from
its keywords and (PII-redacted) quotes, then one merge pass asks which themes
are the same thing; a merge is accepted only if the centroids agree too, so a
model's whim cannot fuse unrelated themes.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import lang
from .clean import near_key
from .keywords import (
    VERB_PARTICLES,
    Analysed,
    Candidate,
    _stem,
    analyse,
    candidates,
    ctfidf,
    keyword_overlap,
    label_from_keywords,
    looks_predicate,
    phrase_key,
    same_stem,
)
from .keywords import phrases as phrase_set
from .llm_port import ChatClient, MergeGroups, ThemeLabel, llm_errors
from .stopwords import FRAME, GENERIC, LY_NOUNS, PERSONAL

log = logging.getLogger(__name__)

QUOTES = 5
QUOTE_CHARS = 300
#: Two quotes this similar are the same point made twice; show only one.
QUOTE_DEDUP_SIM = 0.95
#: An LLM-proposed merge needs at least this centroid cosine as well.
MERGE_MIN_CENTROID_SIM = 0.55


@dataclass
class ThemeInfo:
    id: str
    label: str
    description: str
    keywords: list[str]
    keyword_scores: list[float]
    members: list[int]
    """Indices into the usable-response arrays."""
    quotes: list[int]
    labelled_by: str = "keywords"
    parent: str | None = None
    merged_from: list[str] = field(default_factory=list)
    key_phrases: list[str] = field(default_factory=list)
    """KeyBERT-style key phrases (the first is the keyword label); empty without an embedder."""


@dataclass
class LLMUsage:
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    skipped: str | None = None

    def add(self, result: Any) -> None:
        self.calls += 1
        self.cached += int(bool(getattr(result, "cached", False)))
        u = getattr(result, "usage", None)
        if u is not None:
            self.prompt_tokens += int(getattr(u, "prompt_tokens", 0))
            self.completion_tokens += int(getattr(u, "completion_tokens", 0))
            self.cost_usd += float(getattr(u, "cost_usd", 0.0))


def pick_quotes(
    members: list[int], emb: NDArray[np.float32], centroid: NDArray[np.float32], texts: list[str]
) -> list[int]:
    """Up to QUOTES members closest to the centre, skipping near-identical ones."""
    if not members:
        return []
    m = np.array(members)
    order = m[np.argsort(-(emb[m] @ centroid), kind="stable")]
    chosen: list[int] = []
    keys: set[str] = set()
    for i in order[: QUOTES * 10]:
        key = near_key(texts[i])
        if key in keys or any(float(emb[i] @ emb[j]) >= QUOTE_DEDUP_SIM for j in chosen):
            continue
        chosen.append(int(i))
        keys.add(key)
        if len(chosen) == QUOTES:
            break
    return chosen


Embed = Callable[[list[str]], NDArray[np.float32]]


def _contextual(phrases: list[str]) -> NDArray[np.float32]:  # pragma: no cover - a marker, never called
    raise AssertionError("CONTEXTUAL is a marker")


#: Pass as ``embed`` to rank label phrases by contextual vectors (:func:`contextual_vectors`): no model calls.
CONTEXTUAL: Embed = _contextual


def describe(
    labels: NDArray[np.int64],
    centroids: NDArray[np.float32],
    emb: NDArray[np.float32],
    texts: list[str],
    *,
    embed: Embed | None = None,
    id_prefix: str = "t",
    used: set[str] | None = None,
    avoid: frozenset[str] = frozenset(),
    alone: frozenset[str] = frozenset(),
) -> list[ThemeInfo]:
    """Keyword-based themes, ordered by size (ids t1, t2, ...). Label -1 (= other) is skipped.

    With ``embed`` (the job's embedder), labels are key phrases ranked
    KeyBERT-style (:func:`rank_labels`, :func:`pick_label`); without it, the c-TF-IDF label.
    ``used`` holds labels already given (lower case; the set is updated), ``avoid`` words that may not
    make a label alone besides the generic ones, nor a phrase with only generic words besides them, in any
    spelling (a sub-theme's parent label, so sub-themes say what differs: "Exchange rates" never names a
    sub-theme of "Exchange rate"), ``alone`` words that may not make a label alone but may make one with another
    word (the words generic across a job's themes, for a sub-theme: "Top up pending" names the top-ups of
    "Pending payment").
    """
    k = len(centroids)
    groups = [np.flatnonzero(labels == t).tolist() for t in range(k)]
    order = sorted(range(k), key=lambda t: (-len(groups[t]), t))
    member_texts = [[texts[i] for i in groups[t]] for t in order]
    kws = ctfidf(member_texts)
    member_vecs = [emb[groups[t]] for t in order]
    ranked = (
        None
        if embed is None
        else rank_labels(member_texts, centroids[order], None if embed is CONTEXTUAL else embed, member_vecs,
                         avoid=avoid, alone=alone)
    )
    used = used if used is not None else set()
    out = []
    for n, (t, kw) in enumerate(zip(order, kws, strict=True), start=1):
        words = [w for w, _ in kw]
        quotes = pick_quotes(groups[t], emb, centroids[t], texts)
        if ranked is not None and ranked[n - 1].phrases:
            r = ranked[n - 1]
            label = pick_label(r, used, words)
            ph = r.phrases
            desc = describe_sentence(ph, [texts[i] for i in quotes])
        else:
            ph = []
            label = label_from_keywords(words, used)
            desc = (
                "Responses mentioning " + ", ".join(words[:5]) + "."
                if words
                else "Responses without distinctive keywords."
            )
        out.append(
            ThemeInfo(
                f"{id_prefix}{n}",
                label,
                desc,
                words,
                [s for _, s in kw],
                groups[t],
                quotes,
                key_phrases=ph,
            )
        )
    return out


#: Candidate phrases per theme that are embedded (fewer per theme when there are many themes).
CANDIDATES = 12
#: At most this many candidate phrases are embedded per job (~2 s on 2 cores).
CANDIDATE_BUDGET = 1200
#: MMR trade-off between closeness to the theme centre and novelty against phrases already taken.
MMR_LAMBDA = 0.7
#: Key phrases kept per theme (the first is the label).
KEY_PHRASES = 3
#: Weight of the penalty for a phrase's best cosine to another theme's centre (distinctiveness).
OTHER_WEIGHT = 0.0
#: Weight of the coverage bonus (sqrt of the share of the theme's responses using the phrase).
COVER_WEIGHT = 0.2
#: Weight of the distinctiveness bonus: share / (share + the highest share of one other theme using it).
DIST_WEIGHT = 0.05
#: A label has at most this many words (a longer phrase is not offered to resolve a clash).
MAX_LABEL_WORDS = 4
#: Score bonus per extra word of a phrase (up to two): "arrived cold" says more than "cold".
PHRASE_BONUS = 0.03
#: Score bonus of a phrase of 2+ words holding a verb, an adjective or a negation ("promo code rejected").
PREDICATE_BONUS = 0.03
#: A word used by >= GENERIC_SHARE of the members of >= GENERIC_SPREAD of the themes (of >= GENERIC_MIN_THEMES)
#: is generic in this job ("card" in Banking77, "food" in a delivery app's feedback): never a label alone.
GENERIC_SHARE = 0.05
GENERIC_SPREAD = 0.3
GENERIC_MIN_THEMES = 5


@dataclass
class Ranked:
    """One theme's label material, best first."""

    phrases: list[str]
    """Key phrases as written (MMR: close to the centre, unlike each other); the first is the preferred label."""
    options: list[str]
    """Label options as written, best first: each holds a word that is not generic (nor in ``avoid``)."""
    words: list[str]
    """Distinguishing single words (not generic), most distinctive first: to tell two same-named themes apart."""
    lone: bool = False
    """The only option is one generic word: it is never a label alone."""
    topic: bool = False
    """The lone word is no generic word and no verb or adjective alone, only one another theme says too ("luggage"
    beside "lost luggage"): with nothing to join it to it names the theme, not "General comments (luggage)"."""
    longer: list[str] = field(default_factory=list)
    """Longer phrases holding the best option, as written, most used first: what the theme says when another
    theme has taken the option ("shopping list" -> "add to my shopping list")."""
    predicates: frozenset[str] = frozenset()
    """The theme's single words that read as a verb or an adjective (``keywords.looks_predicate`` on the job's
    cue counts): a lone word is joined to a word of the other kind as a phrase, not with "and"."""


def contextual_vectors(
    vocab: list[str], member_texts: list[list[str]], member_vecs: list[NDArray[np.float32]]
) -> NDArray[np.float32]:
    """A vector per phrase without calling a model: the mean embedding of the responses that use it.

    Over every group given, so a phrase used across themes lands between them
    (and scores lower against any one centre) while a phrase used by a theme's
    core lands on that core.
    """
    index = {p: i for i, p in enumerate(vocab)}
    dims = member_vecs[0].shape[1] if member_vecs else 0
    sums = np.zeros((len(vocab), dims), dtype=np.float32)
    for texts, vecs in zip(member_texts, member_vecs, strict=True):
        for text, v in zip(texts, vecs, strict=True):
            for p in phrase_set(text):
                j = index.get(p)
                if j is not None:
                    sums[j] += v
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    out: NDArray[np.float32] = (sums / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


def word_stats(member_texts: list[list[str]]) -> tuple[Counter[str], Counter[str], frozenset[str]]:
    """Per content word: responses using it, responses using it after a verb/adjective cue; the generic words.

    Generic = :data:`stopwords.GENERIC` (evaluative words, greetings, request frames: no domain words) plus
    the words that spread over this job's themes (:data:`GENERIC_SHARE` / :data:`GENERIC_SPREAD`).
    """
    uses: Counter[str] = Counter()
    cued: Counter[str] = Counter()
    spread: Counter[str] = Counter()
    for texts in member_texts:
        mine: Counter[str] = Counter()
        for t in texts:
            a = analyse(t)
            mine.update(w for w in a.keys if " " not in w)
            cued.update(a.cued)
        uses.update(mine)
        spread.update(w for w, f in mine.items() if f >= max(2, GENERIC_SHARE * len(texts)))
    k = len(member_texts)
    dynamic = {w for w, n in spread.items() if n >= GENERIC_SPREAD * k} if k >= GENERIC_MIN_THEMES else set()
    return uses, cued, frozenset(GENERIC | dynamic)


def generic_words(groups: Iterable[ThemeInfo], texts: list[str]) -> frozenset[str]:
    """The words generic across these groups of responses (:func:`word_stats`: :data:`stopwords.GENERIC` and the
    words that spread over the groups)."""
    return word_stats([[texts[i] for i in g.members] for g in groups])[2]


def rank_labels(
    member_texts: list[list[str]],
    centroids: NDArray[np.float32],
    embed: Embed | None,
    member_vecs: list[NDArray[np.float32]] | None = None,
    *,
    avoid: frozenset[str] = frozenset(),
    alone: frozenset[str] = frozenset(),
) -> list[Ranked]:
    """KeyBERT-style label material per theme: c-TF-IDF candidates ranked by embedding similarity, MMR for diversity.

    1. Candidates: the keys of :func:`keywords.phrases` (spans of up to four
       words inside a clause) used by >= 3 % of the theme's responses, the
       top ``CANDIDATES`` by c-TF-IDF (frequent in the theme, distinctive
       against the others).
    2. Each candidate gets a vector: with ``embed``, the phrase embedded by a
       model (KeyBERT proper); without it (what the pipeline uses), its
       contextual vector, the mean embedding of the responses using it
       (:func:`contextual_vectors`), which needs no model or API call and so
       gives the same labels however the embed stage ran. Its score is the
       cosine to the theme centre (what the theme's texts share) plus bonuses
       for coverage, for distinctiveness (its share here against its highest
       share in one other theme), for 2-4-word phrases and for a phrase with a
       verb, adjective or negation (``keywords.looks_predicate``).
    3. A label option must be used by >= ``LABEL_MIN_USES`` x the most-used
       candidate's responses and hold a word that is not generic
       (:func:`word_stats`) and one used by >= ``LABEL_MIN_COVER`` of the theme; it is expanded to a longer phrase most of its uses
       share ("cold" -> "arrived cold") and shown as most of them write it
       ("top failed" -> "top up failed"). A framed option ("Please send") or one holding a personal pronoun
       ("Card you sent") yields to the best phrase of 2+ words that is neither (:func:`_unframed_first`,
       :func:`_impersonal_first`).
    4. MMR (lambda 0.7) adds key phrases far from the label.
    """
    k = len(member_texts)
    per = max(4, min(CANDIDATES, CANDIDATE_BUDGET // max(1, k)))
    cands = candidates(member_texts, top=per)
    vocab = sorted({c.key for cs in cands for c in cs})
    if not vocab:
        return [Ranked([], [], []) for _ in range(k)]
    if embed is not None:
        vecs = embed(vocab)
    else:
        assert member_vecs is not None
        vecs = contextual_vectors(vocab, member_texts, member_vecs)
    uses, cued, generic = word_stats(member_texts)
    words = _Words(uses, cued, generic, alone, frozenset(_spelling(w) for w in avoid))
    index = {p: i for i, p in enumerate(vocab)}
    sims = vecs @ centroids.T  # phrase x theme
    out: list[Ranked] = []
    for t, c in enumerate(cands):
        if not c:
            out.append(Ranked([], [], []))
            continue
        rows = np.array([index[x.key] for x in c])
        out.append(_rank_theme(c, sims, rows, vecs, t, member_texts[t], words))
    return out


def _spelling(word: str) -> str:
    """One form for a word's spellings ("rates" / "rate", "exchanges" / "exchange"): singular, then stemmed."""
    return _stem(_singular(word))


@dataclass(frozen=True)
class _Words:
    """The job's word statistics (:func:`word_stats`) as :func:`rank_labels` reads them."""

    uses: Counter[str]
    cued: Counter[str]
    generic: frozenset[str]
    """Generic words: never a label alone, nor a phrase of them."""
    alone: frozenset[str] = frozenset()
    """Words that are never a label alone but may be one with another word (:func:`describe`'s ``alone``)."""
    parent: frozenset[str] = frozenset()
    """Words (:func:`_spelling`) that count as generic here: a sub-theme's parent label (:func:`describe`'s
    ``avoid``)."""

    def common(self, word: str) -> bool:
        """``word`` is generic here (:attr:`generic`, or a spelling of a word of :attr:`parent`)."""
        return word in self.generic or (bool(self.parent) and _spelling(word) in self.parent)

    def plain(self, key: str) -> bool:
        """No label alone: an adverb, verb or adjective alone ("repeatedly", "delete", "slow") names how or what
        happened, not to what, also negated ("not working": what is not?); a phrase of generic words names nothing."""
        ws = key.split()
        said = [v for v in ws if v != "not"]
        if len(said) == 1 and (
                (len(said[0]) >= 5 and said[0].endswith("ly") and said[0] not in LY_NOUNS)
                or looks_predicate(said[0], self.cued[said[0]], self.uses[said[0]])):
            return True
        if len(ws) == 1 and key in self.alone:
            return True
        return all(self.common(v) or v == "not" for v in ws)


def _candidate_scores(
    c: list[Candidate], sims: NDArray[np.float32], rows: NDArray[np.int64], t: int, words: _Words
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
    """:func:`rank_labels`' step 2 for theme ``t``: (score, share, distinctiveness, words) per candidate."""
    own = sims[rows, t]
    other = np.delete(sims[rows], t, axis=1).max(axis=1) if sims.shape[1] > 1 else np.zeros_like(own)
    share = np.array([x.share for x in c], dtype=np.float32)
    dist = np.array([x.share / (x.share + x.other) for x in c], dtype=np.float32)
    split = [x.key.split() for x in c]
    n_words = np.array([len(w) for w in split], dtype=np.float32)
    pred = np.array([len(w) > 1 and any(v == "not" or looks_predicate(v, words.cued[v], words.uses[v]) for v in w)
                     for w in split], dtype=np.float32)
    score = (own - OTHER_WEIGHT * np.maximum(other, 0.0) + COVER_WEIGHT * np.sqrt(share) + DIST_WEIGHT * dist
             + PHRASE_BONUS * np.minimum(n_words - 1, 2) + PREDICATE_BONUS * pred)
    return score, share, dist, n_words


def _rank_theme(
    c: list[Candidate], sims: NDArray[np.float32], rows: NDArray[np.int64], vecs: NDArray[np.float32], t: int,
    member_texts: list[str], words: _Words,
) -> Ranked:
    """One theme's :class:`Ranked`: label options (step 3), then MMR key phrases (step 4)."""
    score, share, dist, n_words = _candidate_scores(c, sims, rows, t, words)
    counts = np.array([x.uses for x in c], dtype=np.float32)
    lead = counts >= LABEL_MIN_USES * counts.max()
    texts = _Theme(analyse(x) for x in member_texts)  # once per theme: the helpers below read them often
    stems = [frozenset(_stem(p) for p in a.keys if " " not in p) for a in texts]
    memo: dict[str, str] = {}
    bare: list[Counter[str]] = []  # the theme's bare-word counts, built at the first bare word (_bare_words)

    def said(key: str) -> str:
        """The key expanded and shown as written, once per theme and key."""
        if key not in memo:
            if " " not in key and not bare:
                bare.append(_bare_words(texts))
            memo[key] = display(_expand(key, texts) if " " in key else _expand_word(key, texts, stems, bare[0]), texts)
        return memo[key]

    n_texts = max(1, len(texts))

    def cover(key: str) -> float:
        """The share of the theme's responses using the key's best-covered word (any spelling)."""
        ws = {_stem(v) for v in key.split() if v != "not"}
        return max((sum(w in s for s in stems) / n_texts for w in ws), default=0.0)

    options, lone, topic = _label_options(c, score, n_words, lead, said, words, texts, cover)
    first = int(np.argmax(np.where(lead, score, -np.inf))) if lead.any() else int(np.argmax(score))
    picked = [first]
    while len(picked) < min(KEY_PHRASES, len(c)):
        red = (vecs[rows] @ vecs[rows[picked]].T).max(axis=1)
        mmr = MMR_LAMBDA * score - (1 - MMR_LAMBDA) * red
        mmr[picked] = -np.inf
        picked.append(int(np.argmax(mmr)))
    phrases = list(dict.fromkeys([*options[:1], *(display(_expand(c[i].key, texts), texts) if c[i].key not in memo
                                                   else memo[c[i].key] for i in picked)]))
    split = [x.key.split() for x in c]
    solo = sorted(
        {v for w in split for v in w if not words.common(v) and v not in words.alone and v != "not"},
        # The word breaks a tie: a set's order follows the process's string-hash seed, so without it two
        # processes (a retry, a fan-out) could name one theme differently.
        key=lambda v: (-max(float(dist[j] * share[j]) for j, w in enumerate(split) if v in w), v),
    )
    # Only a lone word is joined to another (pick_label); the words it may be joined to are the theme's.
    predicates = frozenset(v for a in texts for v in a.keys if " " not in v
                           and looks_predicate(v, words.cued[v], words.uses[v])) if lone else frozenset()
    return Ranked(phrases[:KEY_PHRASES], options, solo, lone, topic,
                  _longer(options[0], texts) if options and not lone else [], predicates)


#: A clash is resolved by a longer phrase holding the label that at least this many of the theme's responses say.
EXTEND_MIN_USES = 2


def _longer(shown: str, texts: list[Analysed]) -> list[str]:
    """Phrases of up to four words holding ``shown``'s key that >= :data:`EXTEND_MIN_USES` responses say, as written,
    most used first (ties: the shorter)."""
    key = phrase_key(shown.lower())
    seen: Counter[str] = Counter()
    for a in texts:
        if key in a.keys:
            seen.update(p for p in a.keys if p != key and f" {key} " in f" {p} ")
    ranked = sorted((p for p, f in seen.items() if f >= EXTEND_MIN_USES), key=lambda p: (-seen[p], len(p), p))
    out = [display(p, texts) for p in ranked[:KEY_PHRASES]]
    return [p for p in out if _whole(p, texts)]


def _label_options(
    c: list[Candidate], score: NDArray[np.float32], n_words: NDArray[np.float32], lead: NDArray[np.bool_],
    said: Callable[[str], str], words: _Words, texts: list[Analysed],
    cover: Callable[[str], float] = lambda key: 1.0,
) -> tuple[list[str], bool, bool]:
    """:func:`rank_labels`' step 3: label options as written, best first, whether the only one is generic and
    whether that one is a topic word another theme says too (:attr:`Ranked.topic`).

    A phrase beats a bare word within PHRASE_MARGIN; a bare word is said as a phrase its uses share
    ("minutes" -> "minutes late"); an option must hold a word that is not generic, and one that
    >= :data:`LABEL_MIN_COVER` of the theme's responses use (``cover``: the share of its best-covered word).
    """
    ranked_score = score + np.where(n_words > 1, PHRASE_MARGIN, 0.0)
    options: list[str] = []
    for pool in (lead, ~lead):
        for i in np.argsort(-np.where(pool, ranked_score, -np.inf), kind="stable"):
            if not pool[i] or sum(not framed_phrase(o) for o in options) >= KEY_PHRASES:
                break
            shown = _completed(said(c[i].key), texts)
            if shown is None:
                continue  # a five-token span that drops no determiner, or one cut short: a key phrase, not a label
            if cover(phrase_key(shown.lower())) < LABEL_MIN_COVER:
                continue  # said by too few of the theme to name it ("Kids" for 2 of 22 late or wrong orders)
            if " " not in phrase_key(shown) and c[i].other >= GENERIC_SHARE:
                continue  # a word common in another theme too names neither alone ("Food", "Card")
            if not words.plain(phrase_key(shown)) and shown not in options:
                options.append(shown)
        options = _impersonal_first(_unframed_first(options)[:KEY_PHRASES])
        if options:
            break
    if options:
        return options, False, False
    # No option (every candidate generic, or a word another theme says too): a phrase of them ("good value"),
    # else the best word, which pick_label joins with a keyword ("good and quick").
    multi = [i for i in np.argsort(-score, kind="stable") if n_words[i] > 1]
    key = c[multi[0] if multi else int(np.argmax(score))].key
    shown = display(key, texts)
    # Five tokens that drop no determiner: its content words ("card was not yet delivered" -> "card not delivered").
    return [shown if len(shown.split()) <= MAX_LABEL_WORDS else key], not multi, not multi and not words.plain(key)


def _unframed_first(options: list[str]) -> list[str]:
    """``options`` with the best phrase of 2+ words that is not framed (:func:`framed_phrase`) first when the best
    option is framed: "Please send" yields to "Bike for sale", but not to a bare word ("Inches" for "Volume to
    please"): the label stays a phrase (issue 22 prefers a 2-4-word phrase to a bare noun)."""
    if not options or not framed_phrase(options[0]):
        return options
    better = next((o for o in options if " " in phrase_key(o.lower()) and not framed_phrase(o)), None)
    return options if better is None else [better, *(o for o in options if o != better)]


def _impersonal_first(options: list[str]) -> list[str]:
    """``options`` with the best phrase of 2+ words that holds no personal pronoun (:data:`stopwords.PERSONAL`) and is
    not framed first, when the best option holds one: "Card you sent" yields to "Transactions on card", "Steps do i
    take" (a sub-theme of "Verify identity") to "Identity check". Not to a bare word, as :func:`_unframed_first`;
    with no such phrase the order stays. Label TUNE pool, 2026-12-07: hits 587 -> 588 of 735, 2-4-word labels 640 of
    656 unchanged; sub-themes (bench/sublabels.py, true groups) 60 -> 63 of 139."""
    if not options or not personal_phrase(options[0]):
        return options
    better = next((o for o in options if " " in phrase_key(o.lower()) and not personal_phrase(o)
                   and not framed_phrase(o)), None)
    return options if better is None else [better, *(o for o in options if o != better)]


def personal_phrase(shown: str) -> bool:
    """``shown`` holds a personal pronoun (:data:`stopwords.PERSONAL`: "Card you sent", "Cash i asked")."""
    return any(w in PERSONAL for w in shown.lower().split())


def framed_phrase(shown: str) -> bool:
    """A phrase of 2+ words whose first or last word frames it (:data:`stopwords.FRAME`: "Please send", "Thanks in
    advance", "Phone please"): politeness or a request's frame, not what the theme is about. Such a label option yields
    to the best unframed phrase of 2+ words (:func:`_unframed_first`); it stays a key phrase."""
    ws = phrase_key(shown.lower()).split()
    return len(ws) > 1 and (ws[0] in FRAME or ws[-1] in FRAME)


#: The label (first key phrase) must be used by at least this share of the most-used candidate's responses.
LABEL_MIN_USES = 0.33
#: A label option's best-covered word (any spelling) must be used by at least this share of the theme's responses:
#: a word said by a few of them names those few, not the theme (the demo's "Kids", 2 of 22 late or wrong orders,
#: the one noun no other theme said). A floor, set on the label TUNE pool, 2026-12-07: no TUNE label was under 0.108
#: (0.1 changes none: 587 hits, 640 of 656 2-4-word); at 0.15-0.25 the labels it replaces there ("Disk drive",
#: "Oort cloud", "Best offer") give way to frames and fallbacks ("Thanks in advance", "Please e-mail", "Clinton and
#: care") for +1 hit, so it stays a floor.
LABEL_MIN_COVER = 0.1
#: A key phrase is replaced by a longer candidate containing it that covers at least this share of its uses.
EXPAND_MIN_SHARE = 0.5
#: A bare-word label is replaced by a phrase holding it that this share of its uses say ("cold" -> "food was cold").
LABEL_EXPAND_SHARE = 0.05
#: A label option of 2+ words ranks as if it scored this much more than a bare word.
PHRASE_MARGIN = 0.03
#: Responses read to find how a phrase is written most often.
DISPLAY_SAMPLE = 200


def _expand(phrase: str, texts: list[Analysed], min_share: float = EXPAND_MIN_SHARE) -> str:
    """"cold" -> "arrived cold" when most of the theme's responses saying "cold" say "arrived cold"."""
    uses = 0
    longer: Counter[str] = Counter()
    for t in texts:
        ps = t.keys
        if phrase in ps:
            uses += 1
            longer.update(p for p in ps if p != phrase and f" {phrase} " in f" {p} ")
    best = [(f, -len(p), p) for p, f in longer.items() if f >= min_share * uses and f >= 2]
    return _fitting(best, texts, phrase)


def _fitting(best: Sequence[tuple[float, int, str]], texts: list[Analysed], fallback: str) -> str:
    """The best-scored phrase of ``best`` that shows whole (:func:`_whole`), else ``fallback``: a five-token
    expansion ("refund for something i bought") must not cost a candidate its label ("refund" -> "refund of item"),
    and one cut before its last word is no label ("disposable" -> "disposable virtual card", not "disposable
    virtual")."""
    for *_, p in sorted(best, reverse=True):
        shown = display(p, texts)
        done = _completed(shown, texts)
        if done is not None:
            return p if done == shown else done  # display() shows a phrase that is no key as it is
    return fallback


#: A phrase is cut before its last word when more than this share of the theme's responses using that word (and at
#: least CUT_MIN) say one same word right after it: "Top up using apple" (5 of 7 say "apple watch"), "Disposable
#: virtual" (7 of 7 "virtual card(s)"), "Cheque to top" (15 of 15 "top up"). Half exactly is no cut ("parcel" said
#: "parcel arrived" and "parcel damaged" alike; "contactless stopped working" and "... working today"). Chosen on the
#: label TUNE pool, 2026-12-03 (bench/labels.py: cut-off labels 16 + 9 -> 2 + 0 of 735 themes + their parents, hits
#: 586 -> 586; 0.4 also gave "Payment app reverted", ">= half" "Contactless stopped working today").
CUT_SHARE = 0.5
CUT_MIN = 2


class _Theme(list[Analysed]):
    """A theme's analysed responses, with :func:`cut_after`'s answer per last word remembered (the label helpers ask
    it of one word many times: displayed, completed, checked whole)."""

    cut: dict[str, str | None]

    def __init__(self, items: Iterable[Analysed] = ()) -> None:
        super().__init__(items)
        self.cut = {}


def cut_after(shown: str, texts: list[Analysed]) -> str | None:
    """The word that more than :data:`CUT_SHARE` of the theme's responses using ``shown``'s last word say right after
    it (a content word or a verb particle, singular and plural together, returned as most of them write it); None
    when ``shown`` ends whole. A phrase ending in a stopword ("top up", "log in") ends whole."""
    words = shown.lower().split()
    last = words[-1] if words else ""
    if not isinstance(texts, _Theme):
        return _cut_after(last, last, texts)
    if last not in texts.cut:
        texts.cut[last] = _cut_after(last, last, texts)
    return texts.cut[last]


def _cut_after(last: str, within: str, texts: list[Analysed]) -> str | None:
    """:func:`cut_after` over the responses holding key ``within`` (``last`` itself, or the phrase ending in it)."""
    head = f"{last} "
    uses = 0
    after: Counter[str] = Counter()
    forms: Counter[str] = Counter()
    for a in texts:
        if last not in a.keys or within not in a.keys:
            continue
        uses += 1
        said = [p[len(head):] for p in a.follows if p.startswith(head)]
        after.update({_singular(x) for x in said})
        forms.update(said)
    if not after:
        return None
    # Ties by name: a set's order follows the process's string-hash seed.
    stem, f = min(after.items(), key=lambda p: (-p[1], p[0]))
    if f < CUT_MIN or f <= CUT_SHARE * uses:
        return None
    return min((x for x in forms if _singular(x) == stem), key=lambda x: (-forms[x], x))


def _singular(word: str) -> str:
    """``word`` without a plural "s" ("cards" -> "card", "rates" -> "rate"; not "address"): the followers of a word
    count together across number, which :func:`keywords._stem` does not do for "rate" / "rates"."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _completed(shown: str, texts: list[Analysed]) -> str | None:
    """``shown`` if it is whole (:func:`_whole`); one cut before its last word, said with the word it lacks and its
    window moved right to fit in :data:`MAX_LABEL_WORDS` words, starting on a content word ("Information about
    identity" -> "Information about identity details", "Top up using apple" -> "Apple watch"); else None."""
    if len(shown.split()) > MAX_LABEL_WORDS:
        return None
    after = cut_after(shown, texts)
    if after is None:
        return shown
    stop = lang.current_stopwords()
    ws = [*shown.split(), after]
    while len(ws) > MAX_LABEL_WORDS or ws[0].lower() in stop:
        ws = ws[1:]
    out = " ".join(ws)
    if sum(phrase_key(out.lower()) in a.keys for a in texts) < CUT_MIN:
        # The theme does not say the completion: the word follows the last word elsewhere ("verify identity" where
        # the theme says "identity verification"), then the phrase is whole; or this phrase's own uses go on, in
        # words too long to show, then it is no label ("gun like american" for "... american express").
        key = phrase_key(shown.lower())
        return None if _cut_after(shown.lower().split()[-1], key, texts) is not None else shown
    return out if cut_after(out, texts) is None else None


def _whole(shown: str, texts: list[Analysed]) -> bool:
    """``shown`` can be a label: at most :data:`MAX_LABEL_WORDS` words, and not cut before its last word
    (:func:`cut_after`: "Top up using apple" for a theme that says "top up using my apple watch")."""
    return len(shown.split()) <= MAX_LABEL_WORDS and cut_after(shown, texts) is None


def _bare_words(texts: list[Analysed]) -> Counter[str]:
    """How many of ``texts`` hold each one-word key."""
    said: Counter[str] = Counter()
    for t in texts:
        said.update(p for p in t.keys if " " not in p)
    return said


def _expand_word(
    word: str, texts: list[Analysed], stems: list[frozenset[str]] | None = None, said: Counter[str] | None = None
) -> str:
    """A bare word said as a phrase its uses share: "cold" -> "food cold" (shown "food was cold").

    Of the longer phrases holding the word that >= ``LABEL_EXPAND_SHARE`` of its uses say, the one whose
    added words the theme uses most ("food", in 43 % of a cold-food theme) x how often it is said; the
    word itself when no phrase is said that often. ``said``: ``_bare_words(texts)`` when the caller has it (it
    does not depend on the word: issue 27, once per theme instead of once per word).
    """
    stem = _stem(word)
    uses = 0
    longer: Counter[str] = Counter()
    if said is None:
        said = _bare_words(texts)
    for n_t, t in enumerate(texts):
        ps = t.keys
        # Any spelling counts: "fees" is said as "delivery fee" too.
        if (stem in stems[n_t]) if stems is not None else any(" " not in p and _stem(p) == stem for p in ps):
            uses += 1
            # ``stem in p`` first: a stem is a prefix of its word (keywords._stem cuts an ending off), so a phrase
            # holding a word of this stem holds the stem; the substring test drops most keys before the word-by-word
            # stems (issue 27: the same phrases, in the same order).
            longer.update(p for p in ps if stem in p and " " in p and p.count(" ") <= 2
                          and any(_stem(v) == stem for v in p.split()))
    n = max(1, len(texts))
    best = [
        (f * (1 + max((said[v] / n for v in p.split() if _stem(v) != stem), default=0.0)), -len(p), p)
        for p, f in longer.items()
        if f >= max(2, LABEL_EXPAND_SHARE * uses) and any(_stem(v) != stem and v != "not" for v in p.split())
    ]
    return _fitting(best, texts, word)


#: Words a label does not show (headline style: "Change my pin" -> "Change pin", "Cash from an atm" -> "Cash from
#: atm"): determiners and possessives name nothing, and every word shown counts toward a label's 2-4 words.
LABEL_DROP = frozenset("a an the my your our their his her its".split())
#: Forms of "to be" a label does not show either (headline style, as issue 22 writes its labels: "promo code
#: rejected", not "promo code was rejected"); "has been" goes as a pair ("Top-up has been cancelled" -> "Top-up
#: cancelled"). A negation, a modal or "does" stays: "Card not working", "Card will be accepted"; so does a form
#: after a subject pronoun, whose verb it is ("since it is damaged" is no "since it damaged").
LABEL_DROP_BE = frozenset("is are was were".split())
_PERFECT = frozenset("has have had".split())
_SUBJECTS = frozenset("i you he she it we they there this that".split())


def display(key: str, texts: list[Analysed]) -> str:
    """A phrase key as the theme's responses write it most often ("top failed" -> "top up failed"), in headline
    style (:func:`headline`)."""
    seen: Counter[str] = Counter()
    for a in texts:
        if key in a.keys:
            seen[dict(a.surfaces).get(key, key)] += 1
            if sum(seen.values()) >= DISPLAY_SAMPLE:
                break
    shown = headline(max(seen.items(), key=lambda p: (p[1], p[0] == key))[0] if seen else key)
    # A verb's particle that the theme says after it, also before a determiner ("top up my account", which
    # keywords._particle reads as a preposition): "Cheque to top up", not "Cheque to top".
    after = cut_after(shown, texts)
    return f"{shown} {after}" if after in VERB_PARTICLES else shown


def headline(phrase: str) -> str:
    """``phrase`` without determiners, possessives and auxiliary "to be" (:data:`LABEL_DROP`,
    :data:`LABEL_DROP_BE`), unless nothing else is left."""
    ws = phrase.split()
    aux: set[int] = set()
    for n, w in enumerate(ws):
        if n and ws[n - 1] in _SUBJECTS:
            continue  # the pronoun's verb
        if w in LABEL_DROP_BE:
            aux.add(n)
        elif w in _PERFECT and ws[n + 1 : n + 2] == ["been"]:
            aux |= {n, n + 1}
    kept = [w for n, w in enumerate(ws) if w not in LABEL_DROP and n not in aux]
    return " ".join(kept) if kept else phrase


def _cap(phrase: str) -> str:
    return phrase[:1].upper() + phrase[1:]


def pick_label(r: Ranked, used: set[str], keywords: list[str] | None = None) -> str:
    """The best label option not already used; else the best one with a word that tells the theme apart.

    Never a number: "Card payment (declined)", not "Card payment (2)". ``used`` is updated.
    """
    if r.lone:
        stems = {_stem(r.options[0])}
        for w in dict.fromkeys([*r.words, *(keywords or []), *r.phrases[1:]]):
            if not {_stem(v) for v in w.split()} & stems:
                return pick_label(Ranked(r.phrases, [_joined(r.options[0], w, r.predicates)], r.words), used,
                                  keywords)
        if r.topic:  # nothing else is said twice, but the word names what the theme is about
            return pick_label(Ranked(r.phrases, r.options, r.words), used, keywords)
        # Nothing else is said twice: the theme is short general remarks like "good".
        return pick_label(Ranked(r.phrases, [f"general comments ({r.options[0]})"], r.words), used, keywords)
    for p in r.options or r.phrases:
        if p.lower() not in used:
            used.add(p.lower())
            return _cap(p)
        if p == (r.options or r.phrases)[0]:
            # Taken by another theme: say more of the same phrase ("Add to my shopping list") rather than fall
            # back to a weaker one ("Please add"), which loses what the theme is about.
            for q in r.longer:
                if q.lower() not in used:
                    used.add(q.lower())
                    return _cap(q)
    base = (r.options or r.phrases)[0]
    stems = {_stem(w) for w in base.split()}
    extra = [v for x in [*r.words, *(keywords or [])] for v in x.split()]
    for w in dict.fromkeys(extra):
        label = f"{base} ({w})"
        if _stem(w) not in stems and label.lower() not in used:
            used.add(label.lower())
            return _cap(label)
    for w in dict.fromkeys(extra):  # every word already used with this base: two words
        for v in dict.fromkeys(extra):
            label = f"{base} ({w} {v})"
            if v != w and label.lower() not in used:
                used.add(label.lower())
                return _cap(label)
    label = f"{base} (other)"
    while label.lower() in used:
        label = label[:-1] + " too)"
    used.add(label.lower())
    return _cap(label)


def _joined(lone: str, other: str, predicates: frozenset[str]) -> str:
    """A lone word and another word of its theme as one label: "and" between words of one kind ("Countries and
    locations", "Good and quick"); a verb or adjective before a noun as a phrase ("expensive" + "prices" ->
    "Expensive prices", not "Expensive and prices": the two words name one thing)."""
    if " " not in lone and " " not in other and (lone.lower() in predicates) != (other.lower() in predicates):
        return f"{lone} {other}" if lone.lower() in predicates else f"{other} {lone}"
    return f"{lone} and {other}"


def describe_sentence(phrases: list[str], quotes: list[str]) -> str:
    """One sentence built from the theme's texts: its key phrases and the most central quote."""
    if len(phrases) > 1:
        about = ", ".join(phrases[:-1]) + " and " + phrases[-1]
    else:
        about = phrases[0]
    sentence = f"Responses about {about}"
    if quotes:
        words = quotes[0].split()
        q = " ".join(words[:14]) + (" …" if len(words) > 14 else "")
        sentence += f", such as \u201c{q.rstrip('.')}\u201d"
    return sentence + "."


#: Near-duplicate merge (no LLM needed): pairs of themes whose centres are this close are examined ...
MERGE_CANDIDATE_SIM = 0.75
#: ... and merged when their members are barely separable (two-group silhouette below this) ...
MERGE_MAX_SEPARATION = 0.04
#: ... and their keywords overlap at least this much (Jaccard of word stems), or their labels share a stem.
MERGE_MIN_OVERLAP = 0.25
#: Members per theme used for the separation test.
MERGE_SAMPLE = 200


@dataclass
class MergeRecord:
    into: str
    merged: list[str]
    centroid_similarity: float
    separation: float
    keyword_overlap: float
    by: str = "centroid+keywords"


def separation(a: NDArray[np.float32], b: NDArray[np.float32]) -> float:
    """Mean cosine silhouette of the two-group partition {a, b}: ~0 when the groups are one blob."""
    x = np.concatenate([a, b])
    lab = np.concatenate([np.zeros(len(a), np.int64), np.ones(len(b), np.int64)])
    d = 1.0 - x @ x.T
    onehot = np.stack([lab == 0, lab == 1], axis=1).astype(np.float32)
    counts = onehot.sum(axis=0)
    tot = d @ onehot
    own = tot[np.arange(len(x)), lab] / np.maximum(counts[lab] - 1, 1)
    other = tot[np.arange(len(x)), 1 - lab] / np.maximum(counts[1 - lab], 1)
    sil = (other - own) / np.maximum(np.maximum(own, other), 1e-12)
    return float(sil.mean())


def near_duplicate_groups(
    themes: list[ThemeInfo], index_of: dict[str, int], centroids: NDArray[np.float32], emb: NDArray[np.float32],
    *, seed: int = 0,
) -> list[MergeRecord]:
    """Themes that are the same thing, by centroid similarity + inseparable members + shared keywords.

    A pair qualifies when its centres have cosine >= ``MERGE_CANDIDATE_SIM``,
    the two-group silhouette of its members is below ``MERGE_MAX_SEPARATION``
    (a reader could not tell the groups apart either) and the keyword stems
    overlap by >= ``MERGE_MIN_OVERLAP`` (or the labels share a stem). Each
    theme joins at most one group, headed by the larger theme.
    """
    rng = np.random.default_rng(seed)
    ids = [t.id for t in themes if t.id in index_of and t.members]
    if len(ids) < 2:
        return []
    by_id = {t.id: t for t in themes}
    c = centroids[[index_of[i] for i in ids]]
    sims = c @ c.T
    pairs = [
        (float(sims[a, b]), a, b) for a in range(len(ids)) for b in range(a + 1, len(ids))
        if sims[a, b] >= MERGE_CANDIDATE_SIM
    ]
    pairs.sort(reverse=True)

    def sample(th: ThemeInfo) -> NDArray[np.float32]:
        m = np.array(th.members)
        if len(m) > MERGE_SAMPLE:
            m = rng.choice(m, size=MERGE_SAMPLE, replace=False)
        out: NDArray[np.float32] = emb[m]
        return out

    head: dict[str, str] = {}
    records: dict[str, MergeRecord] = {}
    for sim, a, b in pairs:
        ta, tb = by_id[ids[a]], by_id[ids[b]]
        big, small = (ta, tb) if len(ta.members) >= len(tb.members) else (tb, ta)
        if small.id in head or small.id in records:
            continue
        root = head.get(big.id, big.id)
        overlap = keyword_overlap(ta.keywords[:10], tb.keywords[:10])
        shared = bool({phrase_key(p) for p in ta.key_phrases} & {phrase_key(p) for p in tb.key_phrases})
        if overlap < MERGE_MIN_OVERLAP and not same_stem(ta.label, tb.label) and not shared:
            continue
        sep = separation(sample(ta), sample(tb))
        if sep >= MERGE_MAX_SEPARATION:
            continue
        head[small.id] = root
        rec = records.setdefault(root, MergeRecord(root, [], round(sim, 4), round(sep, 4), round(overlap, 3)))
        rec.merged.append(small.id)
    return list(records.values())


SYSTEM_LABEL = (
    "You name themes found in free-text survey or feedback responses. Given a theme's keywords and example "
    'responses, answer with JSON {"label": short label of 2-5 words, "description": one sentence saying '
    "what these responses have in common}. Do not invent details that are not in the examples."
)
SYSTEM_MERGE = (
    "You review themes found in free-text responses and find near-duplicates: themes that describe the same "
    'topic and should be one. Answer with JSON {"merge": [[theme ids to merge], ...]}; use an empty list when '
    "all themes are distinct. Only merge themes that a reader would clearly consider the same."
)


def llm_label(
    client: ChatClient,
    themes: list[ThemeInfo],
    quote_text: Callable[[int], str],
    usage: LLMUsage,
    progress: Callable[[int], None] | None = None,
    label_language: str | None = None,
) -> None:
    """Replace keyword labels with LLM labels and descriptions, in place. Stops cleanly on budget exhaustion.

    ``label_language`` (a code of ``lang.LANGUAGE_NAMES``) asks for labels in that language; the examples
    are sent as they are, in theirs.
    """
    from .lang import LANGUAGE_NAMES

    skip = llm_errors()
    system = SYSTEM_LABEL
    if label_language is not None:
        system += (f" Write the label and the description in {LANGUAGE_NAMES[label_language]}, whatever the "
                   "language of the examples.")
    for n, th in enumerate(themes):
        prompt = {
            "keywords": th.keywords[:10],
            "examples": [quote_text(i) for i in th.quotes],
            "responses_in_theme": len(th.members),
        }
        try:
            res = client.complete_json(
                [{"role": "system", "content": system}, {"role": "user", "content": json.dumps(prompt)}],
                ThemeLabel,
                max_tokens=200,
                purpose="thematic.label",
            )
        except skip as err:
            usage.skipped = f"labelling stopped: {type(err).__name__}"
            log.warning("LLM labelling stopped after %d themes: %s", n, type(err).__name__)
            return
        usage.add(res)
        value: ThemeLabel = res.value
        th.label, th.description, th.labelled_by = value.label.strip(), value.description.strip(), "llm"
        if progress:
            progress(n + 1)
    # Labels must stay unique for the report and the CSV: a repeated one is told apart by a keyword, not "(2)".
    seen: set[str] = set()
    for th in themes:
        if th.label.lower() in seen:
            th.label = pick_label(Ranked([th.label], [th.label], list(th.keywords)), seen)
        seen.add(th.label.lower())


def llm_merge_groups(
    client: ChatClient, themes: list[ThemeInfo], centroids: dict[str, NDArray[np.float32]], usage: LLMUsage
) -> list[list[str]]:
    """Groups of theme ids to merge: proposed by the LLM, confirmed by centroid similarity."""
    if len(themes) < 2:
        return []
    listing = [{"id": t.id, "label": t.label, "description": t.description, "keywords": t.keywords[:6]} for t in themes]
    try:
        res = client.complete_json(
            [{"role": "system", "content": SYSTEM_MERGE}, {"role": "user", "content": json.dumps(listing)}],
            MergeGroups,
            max_tokens=400,
            purpose="thematic.merge",
        )
    except llm_errors() as err:
        usage.skipped = f"merge pass skipped: {type(err).__name__}"
        return []
    usage.add(res)
    value: MergeGroups = res.value
    valid = {t.id for t in themes}
    taken: set[str] = set()
    groups: list[list[str]] = []
    for g in value.merge:
        ids = [i for i in dict.fromkeys(g) if i in valid and i not in taken]
        if len(ids) < 2:
            continue
        # Keep only members close to the group's first (largest) theme.
        head = ids[0]
        ok = [head] + [i for i in ids[1:] if float(centroids[head] @ centroids[i]) >= MERGE_MIN_CENTROID_SIM]
        if len(ok) >= 2:
            groups.append(ok)
            taken.update(ok)
    return groups


def to_json(themes: list[ThemeInfo]) -> list[dict[str, Any]]:
    return [asdict(t) for t in themes]


def from_json(rows: list[dict[str, Any]]) -> list[ThemeInfo]:
    return [ThemeInfo(**r) for r in rows]


@dataclass
class Levels:
    """The two levels of a result: broad themes (3-12) and the finer themes under them."""

    broad: str
    """Which list holds the broad level: ``parents`` (k > 12) or ``themes`` (k <= 12)."""
    fine: str
    """Which list holds the fine level: ``themes`` (k > 12) or ``subthemes`` (k <= 12)."""
    parents: list[ThemeInfo] = field(default_factory=list)
    """Broad themes above the themes (k > 12); ``members`` are response indices, ``keyword_scores`` unused."""
    children: dict[str, list[str]] = field(default_factory=dict)
    """Parent id -> theme ids."""
    subthemes: list[ThemeInfo] = field(default_factory=list)
    """Sub-themes under the themes (k <= 12), ids ``t1.1``...; ``parent`` is the theme id."""
    sub_of: list[int] = field(default_factory=list)
    """Per usable response: index into ``subthemes``, or -1."""
    scores: list[dict[str, float]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "broad": self.broad,
            "fine": self.fine,
            "parents": to_json(self.parents),
            "children": self.children,
            "subthemes": to_json(self.subthemes),
            "sub_of": self.sub_of,
            "scores": self.scores,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Levels:
        return cls(
            d["broad"], d["fine"], from_json(d["parents"]), d["children"], from_json(d["subthemes"]), d["sub_of"],
            d["scores"],
        )


#: A parent is named by a phrase its children share when the phrase is used by >= this share of its responses.
PARENT_MIN_SHARE = 0.15


def _sub_keys(key: str) -> set[str]:
    """Every contiguous run of the words of a phrase key ("card not arrived" -> "card", "not arrived", ...)."""
    w = key.split()
    return {" ".join(w[i:j]) for i in range(len(w)) for j in range(i + 1, len(w) + 1)} - {"not"}


def name_parents(
    parents: list[ThemeInfo], children: dict[str, list[str]], themes: dict[str, ThemeInfo], texts: list[str],
    used: set[str],
) -> None:
    """Name each broad theme from its children's phrases, in place.

    Candidates are the children's labels and key phrases and every run of their words. A candidate scores
    by the share of the parent's responses using it x the square root of the share of children whose
    phrases hold it x its distinctiveness against the other parents; the best one used by >=
    ``PARENT_MIN_SHARE`` of the parent's responses and shared by two children (when there are two) names
    the parent. Without one the parent is named by its two largest children ("Late delivery and courier
    praise"), which says honestly that the group holds two things. Labels stay unique and never generic.
    """
    kids = {p.id: sorted((themes[c] for c in children.get(p.id, []) if c in themes), key=lambda t: -len(t.members))
            for p in parents}
    own: dict[str, dict[str, set[str]]] = {}  # parent -> candidate -> child ids whose phrases hold it
    for p in parents:
        cand: dict[str, set[str]] = {}
        for th in kids[p.id]:
            for ph in {th.label, *th.key_phrases}:
                for key in _sub_keys(phrase_key(ph.split(" (")[0])):
                    cand.setdefault(key, set()).add(th.id)
        own[p.id] = cand
    vocab = {c for cand in own.values() for c in cand}
    counts: dict[str, Counter[str]] = {}
    for p in parents:
        c: Counter[str] = Counter()
        for i in p.members:
            c.update(k for k in phrase_set(texts[i]) if k in vocab)
        counts[p.id] = c
    # And the words generic across the themes: a parent has few siblings to show them generic ("Mg" in drug reviews).
    uses, cued, theme_generic = word_stats([[texts[i] for i in th.members] for th in themes.values()])
    generic = generic_words(parents, texts) | theme_generic
    # The themes' rule for a word alone (_Words.plain): a verb, adjective or adverb alone ("Charged", "Slow") names
    # how or what happened, not to what; a parent names what its themes are about.
    alone = _Words(uses, cued, generic)
    for p in parents:
        mine = kids[p.id]
        if not mine:
            continue
        if len(mine) == 1:
            # A parent of one theme holds the same responses: it is that theme, and says so ("Dark mode", not
            # "Dark mode (dark mode)"); labels stay unique within each level.
            p.label = mine[0].label
            used.add(p.label.lower())
            continue
        size = max(1, len(p.members))
        scored: list[tuple[float, str]] = []
        for key, holders in own[p.id].items():
            if all(w in generic or w == "not" for w in key.split()):
                continue
            share = counts[p.id][key] / size
            if share < PARENT_MIN_SHARE or (len(mine) >= 2 and len(holders) < 2):
                continue
            other = max((counts[q.id][key] / max(1, len(q.members)) for q in parents if q.id != p.id), default=0.0)
            if " " not in key and (other >= GENERIC_SHARE or alone.plain(key)):
                continue  # a word common in another group too names neither alone ("Transfer", "Card")
            score = share * (len(holders) / len(mine)) ** 0.5 * share / (share + other)
            score *= 1.0 + 0.2 * min(key.count(" "), 2)
            scored.append((score, key))
        said = _Theme(analyse(texts[i]) for i in p.members)
        # The best-scored phrase that ends whole ("Exchange" is said "exchange rate"); ties: the first found.
        whole = next((x for x in (display(key, said) for _, key in sorted(scored, key=lambda q: -q[0]))
                      if cut_after(x, said) is None), None)
        phrases = [] if whole is None else [whole]
        names = [t.label.split(" (")[0] for t in mine[:2]]
        second = names[1][:1].lower() + names[1][1:] if len(names) > 1 else ""
        # A child named with "and" ("Ordered and received") is one item of the list: "Food cold, ordered and
        # received", not "Food cold and ordered and received".
        joined = (names[0] if len(names) == 1 else f"{names[0]}, {second}" if " and " in f"{names[0]} {second}"
                  else f"{names[0]} and {second}")
        r = Ranked([*phrases, joined], [*phrases, joined], [w for t in mine for w in phrase_key(t.label).split()])
        p.label = pick_label(r, used)


def parent_fit(child: int, kids: list[int], sizes: NDArray[np.int64], sums: NDArray[np.float32]) -> float:
    """How well theme ``child`` sits in a parent made of ``kids`` (it included): the cosine of its centre to
    the centre of the other kids minus the mean cosine between the parent's responses (pairs of distinct ones).

    Negative: the theme's centre is further from its siblings' than the parent's own responses are from each
    other, so the parent groups things its members do not share ("courier praise" under "late delivery").
    """
    rest = [c for c in kids if c != child]
    if not rest:
        return 1.0
    r = sums[rest].sum(axis=0)
    own = sums[child]
    total = r + own
    n = int(sizes[kids].sum())
    spread = (float(total @ total) - n) / max(1, n * (n - 1))  # unit vectors: each self-pair adds 1
    cos = float(own @ r) / max(1e-12, float(np.linalg.norm(own) * np.linalg.norm(r)))
    return cos - spread


def coherent_groups(groups: list[int], labels: NDArray[np.int64], emb: NDArray[np.float32], k: int) -> list[int]:
    """The broad level with every theme in a parent it fits (:func:`parent_fit` >= 0).

    A theme that does not fit its parent moves to the parent it fits best, or stands alone as a parent of
    one (which groups nothing) when it fits none; worst misfit first, until none is left. The level may then
    hold a parent or two more than ``cluster.BROAD_MAX``.
    """
    from . import cluster as K

    g = list(groups)
    sums = K.group_sums(labels, emb, k)
    sizes = np.bincount(labels[labels >= 0], minlength=k)
    for step in range(2 * k):
        parents = sorted(set(g))
        kids = {p: [t for t in range(k) if g[t] == p] for p in parents}
        fits = [(parent_fit(t, kids[g[t]], sizes, sums), t) for t in range(k) if len(kids[g[t]]) > 1]
        worst = min(fits, default=None)
        if worst is None or worst[0] >= 0:
            break
        t = worst[1]
        # Moves first; should they not settle within k steps, misfits only stand alone (which always ends).
        best = max(((parent_fit(t, [*kids[p], t], sizes, sums), p) for p in parents if p != g[t] and step < k),
                   default=(-1.0, -1))
        g[t] = best[1] if best[0] >= 0 else max(g) + 1
    ren: dict[int, int] = {}
    return [ren.setdefault(v, len(ren)) for v in g]


def build_levels(
    themes: list[ThemeInfo],
    labels: NDArray[np.int64],
    emb: NDArray[np.float32],
    texts: list[str],
    *,
    min_size: int,
    seed: int,
    embed: Embed | None,
    threads: int = 1,
) -> Levels:
    """Both levels, always: group many themes into 3-12 broad ones, or split few themes into sub-themes
    (``threads``: the sub-theme splits' units, :func:`.cluster.sub_level`; the same result at any count)."""
    from . import cluster as K

    k = len(themes)
    index_of = {th.id: int(labels[th.members[0]]) for th in themes if th.members}
    if k > K.BROAD_MAX:
        groups, scores = K.broad_level(emb, labels, k, seed=seed)
        groups = coherent_groups(groups, labels, emb, k)
        plabels = np.where(labels >= 0, np.array(groups, dtype=np.int64)[np.maximum(labels, 0)], -1)
        kb = max(groups) + 1
        pcent = K.normalise(K.group_sums(plabels, emb, kb))
        used = {t.label.lower() for t in themes}
        parents = describe(plabels, pcent, emb, texts, embed=embed, id_prefix="p", used=set(used))
        pid_of_group = {int(plabels[p.members[0]]): p.id for p in parents if p.members}
        children: dict[str, list[str]] = {p.id: [] for p in parents}
        for th in themes:
            if th.id in index_of:
                pid = pid_of_group[groups[index_of[th.id]]]
                th.parent = pid
                children[pid].append(th.id)
        if embed is not None:
            name_parents(parents, children, {th.id: th for th in themes}, texts, used)
        return Levels("parents", "themes", parents=parents, children=children, scores=scores)
    sub, parent_of = K.sub_level(emb, labels, k, min_size=min_size, seed=seed, threads=threads)
    subthemes: list[ThemeInfo] = []
    sub_of = [-1] * len(labels)
    theme_by_index = {i: th for th in themes for i in [index_of.get(th.id, -1)] if i >= 0}
    taken = {th.label.lower() for th in themes}
    job_generic = generic_words(themes, texts)
    for t, th in sorted(theme_by_index.items(), key=lambda p: p[1].id):
        del t
        mine = sorted({int(v) for v in sub[th.members]})
        if len(mine) < 2:
            continue
        local = -np.ones(len(labels), dtype=np.int64)
        for j, s_idx in enumerate(mine):
            local[sub == s_idx] = j
        cent = K.normalise(K.group_sums(local, emb, len(mine)))
        # A sub-theme says what sets it apart inside its theme: the theme's own words (in any spelling) never name
        # it alone, nor with only generic words ("Exchange rates" under "Exchange rate").
        # Nor do the words generic across the job's themes alone (a sub-theme has few siblings to show them
        # generic); with another word they may: "Top up pending" is what sets the top-ups of "Pending payment"
        # apart, though "top" is said in three of Banking77's seven prefix groups (bench/sublabels.py).
        # A hyphenated word counts by its parts too: "Verify top up" is "Verify top-up" said again.
        avoid = frozenset(p for w in phrase_key(th.label).split() if w != "not" for p in (w, *w.split("-")) if p)
        # One set of taken labels for the whole level: two themes' sub-themes never share a label either
        # (long Yahoo answers gave "Good luck" under two themes).
        subs = describe(local, cent, emb, texts, embed=embed, id_prefix=f"{th.id}.", used=taken, avoid=avoid,
                        alone=job_generic)
        for st in subs:
            st.parent = th.id
            for i in st.members:
                sub_of[i] = len(subthemes)
            subthemes.append(st)
    del parent_of
    return Levels("themes", "subthemes", subthemes=subthemes, sub_of=sub_of)


def memo_embed(embedder: Any) -> Embed:
    """The job's embedder as an :data:`Embed` for phrases, memoised (phrases recur across levels)."""
    memo: dict[str, NDArray[np.float32]] = {}

    def embed(phrases: list[str]) -> NDArray[np.float32]:
        todo = [p for p in dict.fromkeys(phrases) if p not in memo]
        if todo:
            vecs = embedder.embed(todo)
            for p, v in zip(todo, vecs, strict=True):
                memo[p] = np.asarray(v, dtype=np.float32)
        return np.stack([memo[p] for p in phrases]).astype(np.float32)

    return embed


def merge_near_duplicates(
    themes: list[ThemeInfo],
    labels: NDArray[np.int64],
    emb: NDArray[np.float32],
    texts: list[str],
    *,
    embed: Embed | None,
    seed: int,
) -> tuple[list[ThemeInfo], NDArray[np.int64], list[MergeRecord]]:
    """Merge near-duplicate themes (:func:`near_duplicate_groups`); merged themes are described afresh.

    Returns (themes, labels, merge records); the records name the new ids
    (``into``) and the ids before the merge (``merged``, also in the new
    theme's ``merged_from``).
    """
    from . import cluster as K

    k = len(themes)
    centroids = K.normalise(K.group_sums(labels, emb, k))
    index_of = {th.id: int(labels[th.members[0]]) for th in themes if th.members}
    records = near_duplicate_groups(themes, index_of, centroids, emb, seed=seed)
    if not records:
        return themes, labels, []
    remap = np.arange(k)
    for r in records:
        for tid in r.merged:
            remap[index_of[tid]] = index_of[r.into]
    uniq, new = np.unique(remap[np.maximum(labels, 0)], return_inverse=True)
    new = np.where(labels >= 0, new.astype(np.int64), -1)
    cent = K.normalise(K.group_sums(new, emb, len(uniq)))
    merged = describe(new, cent, emb, texts, embed=embed)
    old_of = {i: th.id for th in themes for i in th.members}
    for th in merged:
        src = sorted({old_of[i] for i in th.members})
        th.merged_from = src if len(src) > 1 else []
    # Name the records by the new ids: the new theme whose members came from the record's head.
    for r in records:
        olds = {r.into, *r.merged}
        th_new = next(th for th in merged if set(th.merged_from) == olds or r.into in th.merged_from)
        r.merged = sorted(olds)
        r.into = th_new.id
    log.info("merged %d near-duplicate theme group(s)", len(records))
    return merged, new, records


def level_ids(levels: Levels, themes_by_id: dict[str, ThemeInfo], theme_id: str, n: int) -> tuple[str, str | None]:
    """(broad id, fine id) of usable response ``n`` whose primary theme is ``theme_id``."""
    if levels.broad == "parents":
        return themes_by_id[theme_id].parent or theme_id, theme_id
    j = levels.sub_of[n] if n < len(levels.sub_of) else -1
    if j >= 0 and levels.subthemes[j].parent == theme_id:
        return theme_id, levels.subthemes[j].id
    return theme_id, None


def level_docs(
    items: list[ThemeInfo], counts: dict[str, int], n_usable: int, quote: Callable[[int], dict[str, Any]],
    children: dict[str, list[str]] | None = None,
) -> list[dict[str, Any]]:
    """Result documents of the parents or sub-themes, largest first."""
    out = []
    for th in sorted(items, key=lambda t: -counts.get(t.id, 0)):
        doc: dict[str, Any] = {
            "id": th.id,
            "label": th.label,
            "description": th.description,
            "keywords": th.keywords,
            "key_phrases": th.key_phrases,
            "count": counts.get(th.id, 0),
            "share": round(counts.get(th.id, 0) / n_usable, 4) if n_usable else 0.0,
            "quotes": [quote(i) for i in th.quotes[:3]],
        }
        if children is not None:
            doc["children"] = children.get(th.id, [])
        else:
            doc["parent"] = th.parent
        out.append(doc)
    return out
