"""The researcher's codebook: the themes of a finished result as names, descriptions, keywords and quotes, and the
edits a researcher makes to them (rename, merge, split off by keyword, delete), applied so that assignments and
counts follow and every edit is logged.

Edits are pure functions from a result document to a new one, so the platform can store each edited version next
to the original and apply them under its own concurrency rules (an ``If-Match`` on the job).
"""

from __future__ import annotations

import copy
import functools
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter

from .lang import is_unspaced
from .params import (
    SEED_DESCRIPTION_MAX,
    SEED_EXAMPLE_MAX,
    SEED_KEYWORD_MAX,
    SEED_KEYWORDS_MAX,
    SEED_NAME_MAX,
    shown_name,
    shown_text,
    visible_name,
    visible_text,
)

#: A theme's name as an edit gives it: shown as is in every export, so visible text on one line.
Label = Annotated[str, Field(min_length=1, max_length=120), AfterValidator(visible_name)]


class _Edit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rename(_Edit):
    op: Literal["rename"]
    theme: str
    label: Label
    description: Annotated[str, AfterValidator(visible_text)] | None = Field(default=None, max_length=1000)


class Merge(_Edit):
    op: Literal["merge"]
    themes: list[str] = Field(min_length=2, max_length=50)
    label: Label | None = None


class Split(_Edit):
    """Move the responses of ``theme`` whose text contains ``keyword`` (a whole word) into a new theme."""

    op: Literal["split"]
    theme: str
    keyword: Annotated[str, Field(min_length=2, max_length=60), AfterValidator(visible_name)]
    label: Label


class Delete(_Edit):
    """Remove a theme; its responses become ``other``."""

    op: Literal["delete"]
    theme: str


Edit = Annotated[Rename | Merge | Split | Delete, Field(discriminator="op")]
EDITS: TypeAdapter[list[Edit]] = TypeAdapter(list[Edit])


class EditError(ValueError):
    """An edit that does not fit the document (an unknown theme, a keyword nothing matches). Names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def codebook(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The themes as a codebook: what seeds the next wave (``seed_themes``) and what a researcher edits.

    Within ``params.SeedTheme``'s limits, so it can always be sent back as it is: a keyword longer than a seed's
    (a long hyphenated token is one) is left out, and an LLM's long label or description is cut.
    """
    return [
        {
            "id": t["id"],
            "name": shown_name(str(t["label"]), str(t["id"]))[:SEED_NAME_MAX],
            "description": shown_text(str(t.get("description", "")))[:SEED_DESCRIPTION_MAX],
            "keywords": [k for k in t.get("keywords", []) if len(k) <= SEED_KEYWORD_MAX][:SEED_KEYWORDS_MAX],
            "examples": [str(q["text"])[:SEED_EXAMPLE_MAX] for q in t.get("quotes", [])[:3]],
            "count": t.get("count", 0),
        }
        for t in doc.get("themes", [])
    ]


def apply_edits(doc: dict[str, Any], edits: list[Edit], texts: dict[str, str] | None = None) -> dict[str, Any]:
    """A new document with ``edits`` applied in order, counts and shares recomputed, and the edits logged.

    ``texts`` (response id → text) is needed for a split; quotes are used when it is not given.
    """
    out = copy.deepcopy(doc)
    for i, edit in enumerate(edits):
        where = f"edits[{i}]"
        if isinstance(edit, Rename):
            theme = _theme(out, edit.theme, f"{where}.theme")
            theme["label"] = edit.label
            if edit.description is not None:
                theme["description"] = edit.description
        elif isinstance(edit, Merge):
            _merge(out, edit, where)
            _instrument_remap(out, {t: edit.themes[0] for t in edit.themes[1:]})
            _then_merge(out, edit.themes)
        elif isinstance(edit, Split):
            new_id, moved = _split(out, edit, where, texts or {})
            _instrument_split(out, edit, new_id, moved)
            _then_split(out, edit.theme, new_id)
        else:
            _theme(out, edit.theme, f"{where}.theme")
            _reassign(out, {edit.theme: None})
            out["themes"] = [t for t in out["themes"] if t["id"] != edit.theme]
            _drop_levels(out, {edit.theme})
            _instrument_remap(out, {edit.theme: None})
        out.setdefault("edits", []).append(edit.model_dump())
    _recount(out)
    return out


def _theme(doc: dict[str, Any], theme_id: str, field: str) -> dict[str, Any]:
    for t in doc.get("themes", []):
        if t["id"] == theme_id:
            return t  # type: ignore[no-any-return]
    raise EditError(field, f"no theme {theme_id!r} in this result")


def merge_themes(doc: dict[str, Any], ids: list[str], label: str | None = None, where: str = "themes") -> None:
    """Merge the themes ``ids`` into the first (unlogged: the carry-over of an earlier wave uses it too)."""
    _merge(doc, Merge(op="merge", themes=ids, label=label), where)


def rename_ids(doc: dict[str, Any], mapping: dict[str, str]) -> None:
    """Give themes new ids, all at once (``{"t1": "t2", "t2": "t1"}`` swaps), everywhere the document names them:
    themes, assignments (primary, broad and fine levels), sub-themes (``t1.2`` follows ``t1``) and parents."""

    def new(theme_id: str | None) -> str | None:
        if theme_id is None:
            return None
        head, dot, tail = theme_id.partition(".")
        return mapping.get(head, head) + dot + tail

    for t in doc.get("themes", []):
        t["id"] = new(t["id"])
        t["subthemes"] = [new(x) for x in t.get("subthemes", [])]
        t["merged_from"] = [new(x) for x in t.get("merged_from", [])]
    for st in doc.get("subthemes") or []:
        st["id"], st["parent"] = new(st["id"]), new(st["parent"])
    for p in doc.get("parents") or []:
        p["children"] = [new(c) for c in p.get("children", [])]
    for a in doc.get("assignments", []):
        a["themes"] = [{**r, "theme_id": new(r["theme_id"])} for r in a.get("themes", [])]
        for level in ("broad", "fine"):
            if a.get(level):
                a[level] = new(a[level])


def _drop_levels(doc: dict[str, Any], gone: set[str]) -> None:
    # Sub-themes of a theme that no longer exists go with it; a response whose theme went takes the levels of the
    # theme it has now (_set_levels: no sub-theme, which is the next run's to say).
    doc["subthemes"] = [st for st in doc.get("subthemes") or [] if st["parent"] not in gone]
    for p in doc.get("parents") or []:
        p["children"] = [c for c in p.get("children", []) if c not in gone]
    # A parent whose themes are all gone names nothing (levels.broad_count counts the parents left).
    if doc.get("parents"):
        doc["parents"] = [p for p in doc["parents"] if p["children"]]
    parents = {p["id"] for p in doc.get("parents") or []}
    broad_parents = (doc.get("levels") or {}).get("broad") == "parents"
    for a in doc.get("assignments", []):
        if (not a.get("themes") or (a.get("fine") or "").partition(".")[0] in gone or a.get("broad") in gone
                or (broad_parents and a.get("broad") is not None and a["broad"] not in parents)):
            _set_levels(doc, a)


def _set_levels(doc: dict[str, Any], a: dict[str, Any]) -> None:
    """Both levels of a response whose primary theme changed, from the document's structure: none without a theme
    (a fresh result's "other" bucket); else broad is the theme's parent (or the theme), fine the theme when the fine
    level is themes, and no sub-theme (which one it would be is the next run's to say)."""
    levels = doc.get("levels") or {}
    if not levels or (a.get("broad") is None and a.get("fine") is None and not a.get("themes")):
        return
    if not a.get("themes"):
        a["broad"] = a["fine"] = None
        return
    primary = a["themes"][0]["theme_id"]
    if levels.get("broad") == "parents":
        a["broad"] = next((p["id"] for p in doc.get("parents") or [] if primary in p.get("children", [])), None)
    else:
        a["broad"] = primary
    a["fine"] = primary if levels.get("fine") == "themes" else None


def _merge(doc: dict[str, Any], edit: Merge, where: str) -> None:
    if len(set(edit.themes)) != len(edit.themes):
        raise EditError(f"{where}.themes", "a theme is named twice")
    themes = [_theme(doc, t, f"{where}.themes") for t in edit.themes]
    into = themes[0]
    for other in themes[1:]:
        into["keywords"] = list(dict.fromkeys([*into.get("keywords", []), *other.get("keywords", [])]))[:10]
        into["quotes"] = [*into.get("quotes", []), *other.get("quotes", [])][:5]
        into.setdefault("merged_from", []).append(other["id"])
    if edit.label:
        into["label"] = edit.label
    _reassign(doc, {t["id"]: into["id"] for t in themes[1:]})
    gone = {t["id"] for t in themes[1:]}
    doc["themes"] = [t for t in doc["themes"] if t["id"] not in gone]
    into["subthemes"] = [x for x in into.get("subthemes", []) if x.partition(".")[0] not in gone]
    _drop_levels(doc, gone)


def _instrument_remap(doc: dict[str, Any], mapping: dict[str, str | None]) -> None:
    """The instrument (waves.py) follows a merge (centroids point at the surviving theme) or a delete (at no
    theme: what they code is "other", in this wave and the next alike). Exact: counts move with them."""
    for code in (doc.get("instrument") or {}).get("codes", []):
        for holder in [code, *code.get("splits", [])]:
            if holder.get("theme_id") in mapping:
                holder["theme_id"] = mapping[holder["theme_id"]]


def _instrument_split(doc: dict[str, Any], edit: Split, new_id: str, moved: int) -> None:
    """A split becomes a keyword rule on the source theme's centroids, so the next wave splits the same way.
    Its count here is the split's own (the clustering's members), taken from the source's largest code: an
    approximation, as the instrument's per-response codes are not stored."""
    codes = [c for c in (doc.get("instrument") or {}).get("codes", []) if c.get("theme_id") == edit.theme]
    for c in codes:
        c.setdefault("splits", []).append({"keyword": edit.keyword, "theme_id": new_id, "count": 0})
    if codes:
        biggest = max(codes, key=lambda c: int(c.get("count", 0)))
        take = min(moved, int(biggest.get("count", 0)))
        biggest["count"] = int(biggest["count"]) - take
        biggest["splits"][-1]["count"] = take


def _then_split(doc: dict[str, Any], source: str, new_id: str) -> None:
    """A split of a compared wave's theme is noted on the earlier theme(s) whose count covered its answers
    (``comparison.then[id].split_into``): the source, or the earlier theme it was itself split off. Tested against
    that count, the source "fell" by what the split took (an unchanged wave: 130 -> 86 answers, significant)."""
    then = (doc.get("comparison") or {}).get("then")
    if not then:
        return
    for tid, entry in then.items():
        if tid == source or source in (entry.get("split_into") or ()):
            entry.setdefault("split_into", []).append(new_id)


def _then_merge(doc: dict[str, Any], themes: list[str]) -> None:
    """``split_into`` follows a merge: a split-off merged into another theme makes that theme the holder of the
    earlier theme's answers; merged back into its source it is gone (the source is whole again, tested as before);
    an earlier theme merged away hands its split-offs to the theme it went into (edit.py sums its count there)."""
    then = (doc.get("comparison") or {}).get("then")
    if not then:
        return
    into, gone = themes[0], set(themes[1:])
    for tid in [t for t in themes[1:] if (then.get(t) or {}).get("split_into")]:
        holder = then.setdefault(into, {"label": into, "count": 0})
        holder["split_into"] = [*(holder.get("split_into") or []), *then[tid].pop("split_into")]
    for tid, entry in then.items():
        if entry.get("split_into"):
            kept = list(dict.fromkeys(into if c in gone else c for c in entry["split_into"]))
            entry["split_into"] = [c for c in kept if c != tid]
        if "split_into" in entry and not entry["split_into"]:
            del entry["split_into"]


@functools.lru_cache(maxsize=1024)
def keyword_pattern(keyword: str) -> re.Pattern[str]:
    """A split's keyword as a whole token: not inside a longer word, whatever character it starts or ends with.
    (``\\b`` needs a word character beyond the edge, so ``\\bc\\+\\+\\b`` or ``\\b#refund`` never matched; for a keyword
    with word characters at both ends the two are the same.) waves.py codes the next wave with it too."""
    # Chinese, Japanese and Thai are written without spaces and Korean attaches its particles ("배송이"): a keyword
    # edge in those scripts has no token edge to find, so it matches where it is ("物流" in "物流太慢了").
    left = "" if is_unspaced(keyword[:1]) else r"(?<!\w)"
    right = "" if is_unspaced(keyword[-1:]) else r"(?!\w)"
    return re.compile(rf"{left}{re.escape(keyword)}{right}", re.IGNORECASE)


def _split(doc: dict[str, Any], edit: Split, where: str, texts: dict[str, str]) -> tuple[str, int]:
    source = _theme(doc, edit.theme, f"{where}.theme")
    pattern = keyword_pattern(edit.keyword)
    quotes = {str(q["response_id"]): q["text"] for q in source.get("quotes", [])}
    new_id = _next_id(doc)
    moved = 0
    # A counted copy (schema 1.4) is its first copy's coding: it moves when its first copy does, whatever its own
    # text (it may differ by case, accents, invisible or full-width characters). The first copy comes first.
    decided: dict[str, bool] = {}
    for a in doc.get("assignments", []):
        if not a.get("themes") or a["themes"][0]["theme_id"] != source["id"]:
            continue
        rid, first = str(a["response_id"]), a.get("duplicate_of")
        if first is not None and str(first) in decided:
            hit = decided[str(first)]
        else:
            hit = decided[rid] = bool(pattern.search(texts.get(rid) or quotes.get(rid, "")))
        if hit:
            a["themes"][0] = {**a["themes"][0], "theme_id": new_id}
            moved += 1
    if not moved:
        raise EditError(f"{where}.keyword", f"no response of theme {edit.theme!r} contains {edit.keyword!r}")
    # The new theme sits where its source did: under the same parent, so its responses' levels follow it.
    for p in doc.get("parents") or []:
        if source["id"] in p.get("children", []):
            p["children"].append(new_id)
    for a in doc.get("assignments", []):
        if a.get("themes") and a["themes"][0]["theme_id"] == new_id:
            _set_levels(doc, a)
    doc["themes"].append({
        **{k: v for k, v in source.items() if k not in ("subthemes", "merged_from")},
        "id": new_id, "label": edit.label, "keywords": [edit.keyword],
        "quotes": [q for q in source.get("quotes", []) if pattern.search(q["text"])][:5],
        "description": f"Responses of \u201c{source['label']}\u201d that mention \u201c{edit.keyword}\u201d.",
        "parent": source.get("parent"),
    })
    source["quotes"] = [q for q in source.get("quotes", []) if not pattern.search(q["text"])]
    return new_id, moved


def _next_id(doc: dict[str, Any]) -> str:
    # Never reuse an id the document still refers to: an earlier wave's theme (comparison.then) or one merged
    # away, or the comparison would read a new theme as an old one.
    used = {t["id"] for t in doc.get("themes", [])} | set((doc.get("comparison") or {}).get("then", {}))
    used |= {m for t in doc.get("themes", []) for m in t.get("merged_from", [])}
    # Nor the id of a deleted theme, which the edit log still names (and a reader's notes, or the next wave's
    # comparison when it is an earlier theme).
    used |= {str(t) for e in doc.get("edits", []) for t in [e.get("theme"), *(e.get("themes") or [])] if t}
    n = len(used) + 1
    while f"t{n}" in used:
        n += 1
    return f"t{n}"


def _reassign(doc: dict[str, Any], mapping: dict[str, str | None]) -> None:
    for a in doc.get("assignments", []):
        refs: list[dict[str, Any]] = []
        for ref in a.get("themes", []):
            if ref["theme_id"] in mapping:
                target = mapping[ref["theme_id"]]
                if target is not None and all(r["theme_id"] != target for r in refs):
                    refs.append({**ref, "theme_id": target})
            elif all(r["theme_id"] != ref["theme_id"] for r in refs):
                refs.append(ref)
        a["themes"] = refs
        if not refs and a.get("bucket") == "theme":
            a["bucket"] = "other"


def _recount(doc: dict[str, Any]) -> None:
    """Counts and shares of every theme from the assignments, themes largest first (a stored document's;
    ``baseline._recounted`` is the same on the result model). A response counts in each of its themes, as the run
    counts them: counting only the primary one made a multi_label theme's count drop at its first rename. The two
    levels are recounted the same way (:func:`_recount_levels`)."""
    assignments = doc.get("assignments", [])
    counts: Counter[str] = Counter(str(r["theme_id"]) for a in assignments for r in a.get("themes") or [])
    usable = sum(1 for a in assignments if a.get("bucket") != "unusable") or 1
    for t in doc.get("themes", []):
        t["count"] = counts.get(t["id"], 0)
        t["share"] = round(t["count"] / usable, 4)
    doc["themes"].sort(key=lambda t: -t["count"])
    _recount_levels(doc, usable)
    run_counts = doc.get("run", {}).get("counts")
    if run_counts is not None:
        # A delete or a split moves responses between "theme" and "other": the run's counts follow.
        buckets = Counter(a.get("bucket") for a in doc.get("assignments", []))
        run_counts["themed"], run_counts["other"] = buckets["theme"], buckets["other"]


def level_ids(broad: str | None, fine: str | None, theme_ids: Iterable[str], parent_of: Mapping[str, str]) -> set[str]:
    """The broad and fine level themes a coded response counts in: its ``broad`` and ``fine`` (its primary theme's
    levels) and, with ``multi_label``, the broad theme (parent) of each of its other themes, once each. So a parent's
    count is its responses with any theme in it, as a theme counts every response with it (primary or secondary),
    as ``theme=p1`` on GET /api/jobs/{id}/responses finds them (verbatims.matcher) and never
    less than one of its children's counts; before 2026-12-07 only the primary theme's parent counted, and the
    filter found more responses than ``parents[].count`` said. A sub-theme stays its primary theme's only (it is
    coded on the primary theme: ``subtheme=`` finds ``fine``). ``parent_of``: theme id to parent id (parents level)."""
    out = {lid for lid in (broad, fine) if lid}
    out.update(parent_of[t] for t in theme_ids if t in parent_of)
    return out


def _recount_levels(doc: dict[str, Any], usable: int) -> None:
    """As document.py counts a fresh result's levels: ``levels.broad_count`` / ``fine_count`` the parents or themes
    and sub-themes left (a delete or merge leaves fewer), and a parent's or sub-theme's count its responses' (a
    response with a theme whose broad or fine level it is; the Markdown report's "Broad themes" table)."""
    levels = doc.get("levels")
    if not levels:
        return
    themes = len(doc.get("themes") or [])
    levels["broad_count"] = len(doc.get("parents") or []) if levels.get("broad") == "parents" else themes
    levels["fine_count"] = themes if levels.get("fine") == "themes" else len(doc.get("subthemes") or [])
    parent_of = {str(t["id"]): str(t["parent"]) for t in doc.get("themes") or []
                 if t.get("parent") and levels.get("broad") == "parents"}
    counts = Counter(lid for a in doc.get("assignments") or [] if a.get("themes")
                     for lid in level_ids(a.get("broad"), a.get("fine"),
                                          [str(r["theme_id"]) for r in a["themes"]], parent_of))
    for level in (*(doc.get("parents") or []), *(doc.get("subthemes") or [])):
        level["count"] = counts.get(level["id"], 0)
        level["share"] = round(level["count"] / usable, 4)

