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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .clean import near_key
from .keywords import candidate_phrases, ctfidf, keyword_overlap, label_from_keywords, same_stem
from .llm_port import ChatClient, MergeGroups, ThemeLabel, llm_errors

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
) -> list[ThemeInfo]:
    """Keyword-based themes, ordered by size (ids t1, t2, ...). Label -1 (= other) is skipped.

    With ``embed`` (the job's embedder), labels are key phrases ranked
    KeyBERT-style (:func:`key_phrases`); without it, the c-TF-IDF label.
    """
    k = len(centroids)
    groups = [np.flatnonzero(labels == t).tolist() for t in range(k)]
    order = sorted(range(k), key=lambda t: (-len(groups[t]), t))
    member_texts = [[texts[i] for i in groups[t]] for t in order]
    kws = ctfidf(member_texts)
    member_vecs = [emb[groups[t]] for t in order]
    phrases = (
        None
        if embed is None
        else key_phrases(member_texts, centroids[order], None if embed is CONTEXTUAL else embed, member_vecs)
    )
    used = used if used is not None else set()
    out = []
    for n, (t, kw) in enumerate(zip(order, kws, strict=True), start=1):
        words = [w for w, _ in kw]
        quotes = pick_quotes(groups[t], emb, centroids[t], texts)
        if phrases is not None and phrases[n - 1]:
            ph = phrases[n - 1]
            label = unique_label(ph, used)
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
COVER_WEIGHT = 0.1
#: Score bonus per extra word of a phrase (up to two): "arrived cold" says more than "cold".
PHRASE_BONUS = 0.03


def contextual_vectors(
    vocab: list[str], member_texts: list[list[str]], member_vecs: list[NDArray[np.float32]]
) -> NDArray[np.float32]:
    """A vector per phrase without calling a model: the mean embedding of the responses that use it.

    Over every group given, so a phrase used across themes lands between them
    (and scores lower against any one centre) while a phrase used by a theme's
    core lands on that core.
    """
    from .keywords import phrases as phrase_set

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


def key_phrases(
    member_texts: list[list[str]],
    centroids: NDArray[np.float32],
    embed: Embed | None,
    member_vecs: list[NDArray[np.float32]] | None = None,
) -> list[list[str]]:
    """KeyBERT-style key phrases per theme: c-TF-IDF candidates ranked by embedding similarity, MMR for diversity.

    1. Candidates: 1-3-grams of adjacent content words used by >= 3 % of the
       theme's responses, the top ``CANDIDATES`` by c-TF-IDF (so a phrase must
       be frequent in the theme and distinctive against the others).
    2. Each candidate gets a vector: with ``embed``, the phrase embedded by a
       model (KeyBERT proper); without it (what the pipeline uses), its
       contextual vector, the mean embedding of the responses using it
       (:func:`contextual_vectors`), which needs no model or API call and so
       gives the same labels however the embed stage ran (in process, fanned
       out, an embeddings deployment). Its score is the cosine to the theme
       centre (what the theme's texts share), minus ``OTHER_WEIGHT`` x its best
       cosine to another centre (0: measured best), plus small bonuses for
       coverage and for 2-3-word phrases. A chosen phrase is expanded to a
       longer candidate most of its uses share ("cold" -> "arrived cold").
    3. MMR (lambda 0.7) picks ``KEY_PHRASES`` phrases: each next one is close
       to the centre and far from those already picked. The first names the
       theme; a label is therefore one phrase that the texts share, never two
       unrelated keywords glued together.
    """
    k = len(member_texts)
    per = max(4, min(CANDIDATES, CANDIDATE_BUDGET // max(1, k)))
    cands = candidate_phrases(member_texts, top=per)
    vocab = sorted({p for c in cands for p, _, _ in c})
    if not vocab:
        return [[] for _ in range(k)]
    if embed is not None:
        vecs = embed(vocab)
    else:
        assert member_vecs is not None
        vecs = contextual_vectors(vocab, member_texts, member_vecs)
    index = {p: i for i, p in enumerate(vocab)}
    sims = vecs @ centroids.T  # phrase x theme
    out: list[list[str]] = []
    for t, c in enumerate(cands):
        if not c:
            out.append([])
            continue
        rows = np.array([index[p] for p, _, _ in c])
        own = sims[rows, t]
        if k > 1:
            other = np.delete(sims[rows], t, axis=1).max(axis=1)
        else:
            other = np.zeros_like(own)
        cover = np.array([f for _, _, f in c], dtype=np.float32) / max(1, len(member_texts[t]))
        words = np.array([p.count(" ") for p, _, _ in c], dtype=np.float32)
        score = own - OTHER_WEIGHT * np.maximum(other, 0.0) + COVER_WEIGHT * np.sqrt(cover) + PHRASE_BONUS * np.minimum(words, 2)
        picked: list[int] = []
        while len(picked) < min(KEY_PHRASES, len(c)):
            if picked:
                red = (vecs[rows] @ vecs[rows[picked]].T).max(axis=1)
                mmr = MMR_LAMBDA * score - (1 - MMR_LAMBDA) * red
            else:
                # The label names what many of the theme's texts share: only phrases used by at least
                # LABEL_MIN_USES x the most-used candidate's responses may lead.
                counts = np.array([f for _, _, f in c], dtype=np.float32)
                mmr = np.where(counts >= LABEL_MIN_USES * counts.max(), score, -np.inf)
            mmr[picked] = -np.inf
            picked.append(int(np.argmax(mmr)))
        out.append([_expand(c[i][0], member_texts[t]) for i in picked])
    return out


#: The label (first key phrase) must be used by at least this share of the most-used candidate's responses.
LABEL_MIN_USES = 0.33
#: A key phrase is replaced by a longer candidate containing it that covers at least this share of its uses.
EXPAND_MIN_SHARE = 0.5


def _expand(phrase: str, texts: list[str]) -> str:
    """"cold" -> "arrived cold" when most of the theme's responses saying "cold" say "arrived cold"."""
    from collections import Counter

    from .keywords import phrases as phrase_set

    uses = 0
    longer: Counter[str] = Counter()
    for t in texts:
        ps = phrase_set(t)
        if phrase in ps:
            uses += 1
            longer.update(p for p in ps if p != phrase and f" {phrase} " in f" {p} ")
    best = [(f, -len(p), p) for p, f in longer.items() if f >= EXPAND_MIN_SHARE * uses and f >= 2]
    return max(best)[2] if best else phrase


def unique_label(phrases: list[str], used: set[str]) -> str:
    """The first key phrase not already a label (capitalised), else the first with a number."""
    for p in phrases:
        label = p[:1].upper() + p[1:]
        if label.lower() not in used:
            used.add(label.lower())
            return label
    base, n = phrases[0][:1].upper() + phrases[0][1:], 2
    while f"{base} ({n})".lower() in used:
        n += 1
    used.add(f"{base} ({n})".lower())
    return f"{base} ({n})"


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
        if overlap < MERGE_MIN_OVERLAP and not same_stem(ta.label, tb.label):
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
    # Labels must stay unique for the report and the CSV.
    seen: set[str] = set()
    for th in themes:
        base, n2 = th.label, 2
        while th.label.lower() in seen:
            th.label = f"{base} ({n2})"
            n2 += 1
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


def build_levels(
    themes: list[ThemeInfo],
    labels: NDArray[np.int64],
    emb: NDArray[np.float32],
    texts: list[str],
    *,
    min_size: int,
    seed: int,
    embed: Embed | None,
) -> Levels:
    """Both levels, always: group many themes into 3-12 broad ones, or split few themes into sub-themes."""
    from . import cluster as K

    k = len(themes)
    index_of = {th.id: int(labels[th.members[0]]) for th in themes if th.members}
    if k > K.BROAD_MAX:
        groups, scores = K.broad_level(emb, labels, k, seed=seed)
        plabels = np.where(labels >= 0, np.array(groups, dtype=np.int64)[np.maximum(labels, 0)], -1)
        kb = max(groups) + 1
        pcent = K.normalise(K.group_sums(plabels, emb, kb))
        parents = describe(plabels, pcent, emb, texts, embed=embed, id_prefix="p", used={t.label.lower() for t in themes})
        pid_of_group = {int(plabels[p.members[0]]): p.id for p in parents if p.members}
        children: dict[str, list[str]] = {p.id: [] for p in parents}
        for th in themes:
            if th.id in index_of:
                pid = pid_of_group[groups[index_of[th.id]]]
                th.parent = pid
                children[pid].append(th.id)
        return Levels("parents", "themes", parents=parents, children=children, scores=scores)
    sub, parent_of = K.sub_level(emb, labels, k, min_size=min_size, seed=seed)
    subthemes: list[ThemeInfo] = []
    sub_of = [-1] * len(labels)
    theme_by_index = {i: th for th in themes for i in [index_of.get(th.id, -1)] if i >= 0}
    for t, th in sorted(theme_by_index.items(), key=lambda p: p[1].id):
        del t
        mine = sorted({int(v) for v in sub[th.members]})
        if len(mine) < 2:
            continue
        local = -np.ones(len(labels), dtype=np.int64)
        for j, s_idx in enumerate(mine):
            local[sub == s_idx] = j
        cent = K.normalise(K.group_sums(local, emb, len(mine)))
        subs = describe(local, cent, emb, texts, embed=embed, id_prefix=f"{th.id}.", used={th.label.lower()})
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
