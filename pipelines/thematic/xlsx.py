"""``?format=xlsx``: the result as an Excel workbook, with the responses' texts and metadata from the stored input.

Sheets: Themes (every level), Responses (one row per response, submitted order), Breakdowns (one row per
segment × theme), Impact when the result has an ``impact`` field and Changes when it has a ``comparison``
(``compare_to``: each theme's count and share in both waves, the change, p, q). Written with openpyxl's write-only mode:
each sheet streams to a temporary file as its rows are appended, so memory holds one row at a time plus the
shared strings, and the zip is assembled at the end (bench/exports.py measures a 20,000-response job).

Every cell is inert: a string is always a string cell (never a formula, whatever it starts with), characters
XML cannot carry are dropped, and cells are cut at Excel's 32,767-character limit. A sheet keeps within Excel's
16,384 columns: metadata keys past it go into one last ``metadata_other`` column, a row's as JSON.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from . import insight
from . import verbatims as V
from .impact import starred
from .render import FAMILIES_NOTE, family_names, formula_like, metadata_columns

XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
EXCEL_CELL_MAX = 32_767
#: Columns a worksheet may have (A to XFD): past it Excel refuses the file until it "repairs" (drops) the sheet.
EXCEL_MAX_COLUMNS = 16_384
#: The last column of the Responses sheet when its metadata keys would pass EXCEL_MAX_COLUMNS: the rest, as JSON.
OTHER_COLUMN = "metadata_other"
#: Integers below this in magnitude (15 digits) are exact in Excel; larger ones are written as text.
EXCEL_EXACT_INT = 10**15
THEME_COLUMNS = ("theme_id", "level", "parent", "label", "count", "share", "description", "keywords",
                 "positive", "neutral", "negative", "sentiment_mean", "sentiment_nps")
RESPONSE_COLUMNS = ("response_id", "text", "bucket", "reason", "theme_id", "theme_label", "confidence",
                    "other_themes", "other_theme_labels", "sentiment", "sentiment_score", "seed_codes")
#: The level that is not the theme itself: broad themes above (more than 12 themes) or sub-themes below.
BROAD_COLUMNS = ("broad_id", "broad_label")
#: The last column when the broad level is parents (after the metadata, so every other column keeps its place): the
#: broad themes of a response's other themes (multi_label) that are not ``broad_id``; a broad theme's count (the
#: Themes sheet) is its responses with it in either column, as ``theme=p1`` lists them.
OTHER_BROAD_COLUMN = "other_broad_ids"
FINE_COLUMNS = ("fine_id", "fine_label")
#: ``small_n`` last (schema 1.5, added after the columns a reader may already address by position), then
#: ``synthetic`` (1.6: "missing" or "other" for a group Thematiq made, empty for a submitted value).
BREAKDOWN_COLUMNS = ("field", "kind", "group", "n", "theme_id", "theme_label", "count", "share", "lift", "p", "q",
                     "significant", "test", "small_n", "synthetic")
#: ``starred`` is the service's mark (``impact.starred``: the interval excludes 0, not small_n, not explained by
#: other themes); ``explained_by`` names those themes by label (schema 1.5, one theme per response).
IMPACT_COLUMNS = ("theme_id", "label", "n", "score", "impact", "ci_low", "ci_high", "small_n", "starred",
                  "explained_by")
#: The families of near earlier themes (comparison.groups), under the per-theme rows of the Changes sheet.
FAMILY_COLUMNS = ("family", "theme_ids", "labels", "count_then", "share_then", "count_now", "share_now", "change", "p",
                  "q", "significant", "test")
CHANGE_COLUMNS = ("theme_id", "label", "status", "count_then", "share_then", "count_now", "share_now", "change", "p",
                  "q", "significant", "test")


class _Cells:
    """Turns values into write-only cells that Excel never evaluates."""

    def __init__(self) -> None:
        from openpyxl.cell import WriteOnlyCell
        from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

        self._cell, self._illegal = WriteOnlyCell, ILLEGAL_CHARACTERS_RE

    def value(self, ws: Any, v: Any) -> Any:
        if v is None or v == "":
            return None  # skipped by the writer, where "" would still cost an element
        if isinstance(v, bool | float) or (isinstance(v, int) and -EXCEL_EXACT_INT < v < EXCEL_EXACT_INT):
            return v
        # An integer Excel cannot hold exactly (it keeps 15 significant digits; past 1.8e308 openpyxl cannot even
        # write it: OverflowError, a 500) is kept as the text of its digits, like an id.
        s = str(v) if isinstance(v, int) else v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        s = self._illegal.sub("", s)[:EXCEL_CELL_MAX]
        if not formula_like(s):
            return s
        cell = self._cell(ws, value=s)
        cell.data_type = "s"  # openpyxl would make "=..." a formula
        # A string cell is text when the workbook opens, but Excel re-reads a cell that is edited: the quote prefix
        # keeps "+1+1" or "＝1+1" text then too (before, only "=..." had it).
        cell.quotePrefix = True
        return cell

    def row(self, ws: Any, values: Iterable[Any]) -> list[Any]:
        return [self.value(ws, v) for v in values]


def _themes(doc: Mapping[str, Any]) -> Iterable[list[Any]]:
    for p in doc.get("parents") or []:
        yield [p["id"], "broad", "", p["label"], p["count"], p.get("share"), p.get("description", ""),
               ", ".join(p.get("keywords", [])), None, None, None, None, None]
    for t in doc.get("themes", []):
        s = t.get("sentiment") or {}
        yield [t["id"], "theme", t.get("parent") or "", t["label"], t["count"], t["share"], t.get("description", ""),
               # A 0-10 rating's theme NPS (the report's and dashboard's number), not only its mean (NPS / 100).
               ", ".join(t.get("keywords", [])), s.get("positive"), s.get("neutral"), s.get("negative"), s.get("mean"),
               s.get("nps")]
    for st in doc.get("subthemes") or []:
        yield [st["id"], "sub-theme", st["parent"], st["label"], st["count"], st["share"], st.get("description", ""),
               ", ".join(st.get("keywords", [])), None, None, None, None, None]


def _responses(doc: Mapping[str, Any], data: Any) -> tuple[list[str], Iterable[list[Any]]]:
    """The header and one row per response. Of the two levels only the one that differs from ``theme_id`` gets
    columns (its id and label); fewer cells is most of what an xlsx of 20,000 rows costs."""
    rows = V.join(doc, data)
    keys = V.metadata_keys(rows)
    labels = V.Labels(doc)
    level, level_columns = ("broad", BROAD_COLUMNS) if (doc.get("levels") or {}).get("broad") == "parents" else (
        "fine", FINE_COLUMNS)
    fixed = (*RESPONSE_COLUMNS[:9], *level_columns, *RESPONSE_COLUMNS[9:])
    tail = (OTHER_BROAD_COLUMN,) if level == "broad" else ()
    spill = len(fixed) + len(keys) + len(tail) > EXCEL_MAX_COLUMNS
    if spill:
        # Past Excel's last column: the first keys keep a column each, a row's others go into OTHER_COLUMN as JSON.
        keys = keys[:EXCEL_MAX_COLUMNS - len(fixed) - len(tail) - 1]
        header = [*fixed, *metadata_columns(keys, (*fixed, OTHER_COLUMN, *tail)), OTHER_COLUMN, *tail]
    else:
        header = [*fixed, *metadata_columns(keys, (*fixed, *tail)), *tail]
    kept = set(keys)

    def gen() -> Iterable[list[Any]]:
        for r in rows:
            a = r.assignment or {}
            refs = a.get("themes") or []
            first = refs[0] if refs else None
            sentiment = a.get("sentiment") or {}
            meta = r.item.get("metadata") or {}
            yield [
                r.item.get("id"), r.item.get("text"), a.get("bucket") or "unusable", a.get("reason"),
                first["theme_id"] if first else None, labels.label(first["theme_id"]) if first else None,
                first["confidence"] if first else None, ";".join(ref["theme_id"] for ref in refs[1:]),
                # The secondary themes by name too (multi_label), in the ids' order: ids alone said nothing to a
                # reader of the sheet. A label is user text at times: the cell writer keeps it inert.
                "; ".join(labels.label(ref["theme_id"]) for ref in refs[1:]),
                a.get(level), labels.label(a.get(level)),
                sentiment.get("label"), sentiment.get("score"),
                ";".join(c["name"] for c in a.get("seed_codes") or []),
                *(meta.get(k) for k in keys),
                *([{k: v for k, v in meta.items() if k not in kept} or None] if spill else []),
                *([";".join(dict.fromkeys(p for ref in refs[1:] if (p := labels.parent_of.get(ref["theme_id"]))
                                          and p != a.get(level)))] if tail else []),
            ]

    return header, gen()


def _breakdowns(doc: Mapping[str, Any]) -> Iterable[list[Any]]:
    labels = V.Labels(doc)
    for b in doc.get("breakdowns") or []:
        for g in b.get("groups", []):
            for c in g.get("themes", []):
                # The value as the Responses sheet's metadata column has it (so a lookup joins the two), and the
                # synthetic column tells a survey's own "(missing)" from the responses without a value (1.6).
                yield [b["field"], b["kind"], g["value"], g["n"], c["theme_id"], labels.label(c["theme_id"]),
                       c["count"], c["share"], c.get("lift"), c.get("p"), c.get("q"), bool(c.get("significant")),
                       c.get("test"), bool(g.get("small_n")), insight.synthetic_of(g)]


def _impact(impact: Mapping[str, Any]) -> Iterable[list[Any]]:
    # The summary first (what the scores are on), then one row per theme, from exactly these keys.
    for key in ("key", "scale", "overall", "n", "min_n"):
        yield [key, impact.get(key)]
    yield []
    yield list(IMPACT_COLUMNS)
    label_of = {str(t.get("theme_id")): str(t.get("label", t.get("theme_id"))) for t in impact.get("themes") or []}
    for t in impact.get("themes") or []:
        extra = {"starred": starred(t),
                 "explained_by": "; ".join(label_of.get(str(i), str(i)) for i in t.get("explained_by") or []) or None}
        yield [extra[k] if k in extra else t.get(k) for k in IMPACT_COLUMNS]
    if impact.get("note"):  # one theme per response: what an impact is relative to (schema 1.5)
        yield []
        yield ["note", impact["note"]]


def _changes(cmp: Mapping[str, Any]) -> Iterable[list[Any]]:
    # What the shares are of (the usable responses of each wave), then one row per theme: the wave-over-wave
    # table the Markdown report and the dashboard show, which the workbook did not have.
    for key in ("job_id", "n_then", "n_now"):
        yield [key, cmp.get(key)]
    yield ["testing", (cmp.get("testing") or {}).get("procedure")]
    if cmp.get("warning"):  # discover mode: its significance is approximate (derive.DISCOVER_WARNING)
        yield ["warning", cmp["warning"]]
    yield []
    yield list(CHANGE_COLUMNS)
    for r in cmp.get("themes") or []:
        yield [r.get(k) for k in CHANGE_COLUMNS]
    groups = [g for g in cmp.get("groups") or [] if isinstance(g, dict)]
    if groups:
        # Each family tested as one share: the only test of a theme a split took out of the rows above.
        labels = {str(r.get("theme_id")): str(r.get("label")) for r in cmp.get("themes") or []}
        yield []
        yield [FAMILIES_NOTE]
        yield list(FAMILY_COLUMNS)
        for g in groups:
            yield [g.get("family"), ";".join(g.get("theme_ids") or []), family_names(g, labels, cmp.get("then") or {}),
                   *(g.get(k) for k in FAMILY_COLUMNS[3:])]


def render_xlsx(doc: dict[str, Any], data: Any) -> tuple[str, bytes]:
    # Imported here: the host's cold start never pays for openpyxl, only an xlsx download does.
    from openpyxl import Workbook

    wb = Workbook(write_only=True)
    cells = _Cells()

    def sheet(title: str, header: Iterable[Any], rows: Iterable[Iterable[Any]]) -> None:
        ws = wb.create_sheet(title)
        ws.append(cells.row(ws, header))
        for r in rows:
            ws.append(cells.row(ws, r))

    sheet("Themes", THEME_COLUMNS, _themes(doc))
    header, responses = _responses(doc, data)
    sheet("Responses", header, responses)
    sheet("Breakdowns", BREAKDOWN_COLUMNS, _breakdowns(doc))
    impact = doc.get("impact")
    if isinstance(impact, dict):
        ws = wb.create_sheet("Impact")
        for r in _impact(impact):
            ws.append(cells.row(ws, r))
    comparison = doc.get("comparison")
    if isinstance(comparison, dict):
        ws = wb.create_sheet("Changes")
        for r in _changes(comparison):
            ws.append(cells.row(ws, r))
    out = io.BytesIO()
    wb.save(out)
    return XLSX_TYPE, out.getvalue()
