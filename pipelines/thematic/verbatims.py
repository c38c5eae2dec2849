"""Every response with its themes: the stored input (texts and metadata as submitted) joined with the result's
assignments, for ``GET /api/jobs/{id}/responses`` and the CSV/xlsx exports.

The result keeps ids, not texts (a text lives once, in the input), so this join is the only place the two
meet. Pure functions of (result, input): the platform does the reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.sdk import (
    LevelLink,
    ResponsePage,
    ResponseQuery,
    ResponseRow,
    RowSentiment,
    ThemeLink,
    ValidationFailed,
)

from . import derive
from .insight import GROUP_LABEL_CHARS, OTHER_VALUES, meta_text, synthetic_of
from .validate import responses_of

#: ``missing=KEY`` and ``other_values=KEY`` (schema 1.6): the responses of a breakdown's synthetic groups, which no
#: ``metadata[KEY]=`` value can name (``metadata[plan]=(missing)`` is a survey's own answer "(missing)").
FILTERS = frozenset({"theme", "subtheme", "bucket", "sentiment", "missing", "other_values"})
BUCKETS = ("theme", "other", "unusable")
SENTIMENTS = ("positive", "neutral", "negative")


@dataclass(frozen=True)
class Joined:
    """One response: its input item and its assignment (None for an id the result does not know)."""

    item: dict[str, Any]
    assignment: dict[str, Any] | None


def join(doc: Mapping[str, Any], data: Any) -> list[Joined]:
    """The input's responses in their submitted order, each with its assignment."""
    by_id = {str(a["response_id"]): a for a in doc.get("assignments", [])}
    return [Joined(item, by_id.get(str(item.get("id")))) for item in responses_of(data)]


def metadata_keys(rows: list[Joined]) -> list[str]:
    """Every metadata key, in the order it first appears."""
    seen: dict[str, None] = {}
    for r in rows:
        for k in r.item.get("metadata") or {}:
            seen.setdefault(str(k), None)
    return list(seen)


class Labels:
    """Theme, parent and sub-theme labels, and each theme's parent, read once per document."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.themes = {t["id"]: t["label"] for t in doc.get("themes", [])}
        self.parents = {p["id"]: p["label"] for p in doc.get("parents") or []}
        self.subthemes = {s["id"]: s["label"] for s in doc.get("subthemes") or []}
        self.parent_of = {t["id"]: t["parent"] for t in doc.get("themes", []) if t.get("parent")}
        levels = doc.get("levels") or {}
        self.fine_is_themes = levels.get("fine") == "themes"
        self.broad_level = levels.get("broad")

    def broad_of(self, tid: str) -> str | None:
        """The broad theme ``tid`` is in: its parent (broad level parents), itself (broad level themes), or None
        (no parent, or a document without levels)."""
        if self.broad_level == "parents":
            return self.parent_of.get(tid)
        return tid if self.broad_level == "themes" else None

    def label(self, tid: str | None) -> str:
        if not tid:
            return ""
        return self.themes.get(tid) or self.parents.get(tid) or self.subthemes.get(tid) or tid

    def link(self, tid: str | None) -> LevelLink | None:
        return LevelLink(id=tid, label=self.label(tid)) if tid else None


def _unknown(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"invalid filter {field}", [{"field": field, "message": message}])


def matcher(doc: Mapping[str, Any], rows: list[Joined], query: ResponseQuery) -> Callable[[Joined], bool]:
    """The query as one predicate; a value that names nothing in this job is a 422 naming its parameter."""
    labels = Labels(doc)
    tests: list[Callable[[Joined], bool]] = []
    f = query.filters
    if "theme" in f:
        theme = f["theme"]
        if theme not in labels.themes and theme not in labels.parents:
            raise _unknown("theme", f"no theme or broad theme {theme[:40]!r} in this result")
        # A theme, or a broad theme through any of its children (primary or secondary).
        wanted = {theme} | {t for t, p in labels.parent_of.items() if p == theme}

        def in_theme(r: Joined) -> bool:
            a = r.assignment
            return a is not None and (a.get("broad") == theme
                                      or any(ref["theme_id"] in wanted for ref in a.get("themes") or ()))

        tests.append(in_theme)
    if "subtheme" in f:
        sub = f["subtheme"]
        if sub not in labels.subthemes and not (labels.fine_is_themes and sub in labels.themes):
            raise _unknown("subtheme", f"no sub-theme {sub[:40]!r} in this result")
        if sub in labels.themes:
            # The fine level is the themes (broad = parents): a theme's responses, as primary or secondary theme,
            # as ``theme`` has them and the theme's count counts them. A sub-theme (t3.2) is coded on a response's
            # primary theme only (its count too): ``fine``.
            tests.append(lambda r: r.assignment is not None
                         and any(ref["theme_id"] == sub for ref in r.assignment.get("themes") or ()))
        else:
            tests.append(lambda r: r.assignment is not None and r.assignment.get("fine") == sub)
    if "bucket" in f:
        bucket = f["bucket"]
        if bucket not in BUCKETS:
            raise _unknown("bucket", f"one of {', '.join(BUCKETS)}")
        tests.append(lambda r: r.assignment is not None and r.assignment.get("bucket") == bucket)
    if "sentiment" in f:
        label = f["sentiment"]
        if label not in SENTIMENTS:
            raise _unknown("sentiment", f"one of {', '.join(SENTIMENTS)}")
        tests.append(lambda r: ((r.assignment or {}).get("sentiment") or {}).get("label") == label)
    tests += _synthetic_groups(doc, rows, f)
    if query.metadata:
        keys = set(metadata_keys(rows))
        for key, want in query.metadata.items():
            if key not in keys:
                raise _unknown(f"metadata[{key[:40]}]", f"no response has the metadata key {key[:40]!r}")

            def text_of(r: Joined, key: str = key) -> str | None:
                meta = r.item.get("metadata") or {}
                return meta_text(meta[key]) if key in meta else None

            cut = len(want) >= GROUP_LABEL_CHARS and not any(text_of(r) == want for r in rows)

            def has(r: Joined, key: str = key, want: str = want, cut: bool = cut) -> bool:
                # A breakdown's label of a longer value (its first 80 characters, or more to tell it from another:
                # insight._distinct_cuts; the dashboard's segment hints and a reader copying the table give it) finds
                # the responses its group counts; a value some response has whole is matched whole.
                text = text_of(r, key)
                return text is not None and (text == want or (cut and text.startswith(want)))

            tests.append(has)
    return lambda r: all(t(r) for t in tests)


def _synthetic_groups(doc: Mapping[str, Any], rows: list[Joined], f: Mapping[str, str]) -> list[Callable[[Joined], bool]]:
    """``missing=KEY``: responses without a value for KEY (absent, null or ""), a breakdown's "(missing)" group, the
    unusable ones too (as ``metadata[KEY]=`` lists them; ``usable`` is the group's n). ``other_values=KEY``: the usable
    responses the breakdown by KEY pooled as "other values" (derive.group_of, the breakdown's own grouping)."""
    tests: list[Callable[[Joined], bool]] = []
    if "missing" in f:
        key = f["missing"]
        if key not in set(metadata_keys(rows)):
            raise _unknown("missing", f"no response has the metadata key {key[:40]!r}")
        tests.append(lambda r: (r.item.get("metadata") or {}).get(key) in (None, ""))
    if "other_values" in f:
        key = f["other_values"]
        fields = [str(b.get("field")) for b in doc.get("breakdowns") or []]
        if key not in fields:
            raise _unknown("other_values", f"no breakdown by {key[:40]!r} in this result (breakdowns: "
                           f"{', '.join(x[:40] for x in fields) or 'none'})")
        meta = {str(r.item.get("id")): r.item.get("metadata") for r in rows}
        pooled = {rid for rid, g in derive.group_of(doc, meta, key).items() if g is OTHER_VALUES}
        # The filter regroups with today's rules; a document made by older ones (before schema 1.6 an undeclared
        # 0-10 field was NPS groups, a real "(missing)" merged with the synthetic group) can pool another set than
        # the one its table shows. Listing that set under the table's "other values" n would mislead, so say so.
        stored = _stored_other_n(doc, key)
        if stored != len(pooled):
            raise _unknown("other_values", f"this result's 'other values' group of {key[:40]!r} has n {stored}, but "
                           f"today's grouping pools {len(pooled)} responses (the breakdown was made by older rules); "
                           "a codebook edit or a rerun recomputes the breakdowns")
        tests.append(lambda r: str(r.item.get("id")) in pooled)
    return tests


def _stored_other_n(doc: Mapping[str, Any], key: str) -> int:
    """The n of the stored breakdown by ``key``'s "other values" group (0 when it has none)."""
    for b in doc.get("breakdowns") or []:
        if str(b.get("field")) == key:
            return sum(int(g.get("n") or 0) for g in b.get("groups") or [] if synthetic_of(g) == "other")
    return 0


def to_row(r: Joined, labels: Labels) -> ResponseRow:
    a = r.assignment or {}
    sentiment = a.get("sentiment")
    return ResponseRow(
        id=r.item["id"],
        text=r.item.get("text") or "",
        metadata=dict(r.item.get("metadata") or {}),
        bucket=a.get("bucket") or "unusable",
        reason=a.get("reason") or (None if r.assignment is not None else "not in the result"),
        # Each theme's broad theme (multi_label: every broad theme the response counts in); the primary's is the
        # stored one, as the row's broad is.
        themes=[ThemeLink(theme_id=ref["theme_id"], label=labels.label(ref["theme_id"]),
                          confidence=float(ref["confidence"]),
                          broad=labels.link(a.get("broad") if k == 0 else labels.broad_of(ref["theme_id"])))
                for k, ref in enumerate(a.get("themes") or [])],
        broad=labels.link(a.get("broad")),
        fine=labels.link(a.get("fine")),
        sentiment=RowSentiment(label=sentiment["label"], score=float(sentiment["score"])) if sentiment else None,
    )


def page(doc: dict[str, Any], data: Any, query: ResponseQuery) -> ResponsePage:
    """One page of rows from ``query.start`` on; ``next_start`` is the position of the next matching row."""
    rows = join(doc, data)
    keep = matcher(doc, rows, query)
    labels = Labels(doc)
    items: list[ResponseRow] = []
    next_start: int | None = None
    total = usable = 0
    for i, r in enumerate(rows):
        if not keep(r):
            continue
        total += 1
        # The breakdowns count usable responses only (derive._usable), so a segment's n is this, not total.
        usable += ((r.assignment or {}).get("bucket") or "unusable") != "unusable"  # as to_row marks it
        if i < query.start:
            continue
        if len(items) < query.limit:
            items.append(to_row(r, labels))
        elif next_start is None:
            next_start = i
    return ResponsePage(items=items, next_start=next_start, total=total, usable=usable)

