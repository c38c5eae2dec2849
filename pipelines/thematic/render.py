"""Renderers of a stored result document: CSV of assignments and a Markdown report."""

from __future__ import annotations

import csv
import io
import unicodedata
from typing import Any, Final

from pipelines.thematic import impact, insight, mdsafe, verbatims

CSV_COLUMNS = (
    "response_id", "theme_id", "theme_label", "confidence", "bucket", "reason", "seed_codes", "sentiment",
    "sentiment_score",
)
#: Last (after text and the metadata) when the broad level is parents (more than 12 themes): the row's theme's
#: broad theme.
BROAD_CSV_COLUMNS = ("broad_id", "broad_label")


#: The first characters that make a spreadsheet read a cell as a formula: = + - @, a tab or CR before one, and the
#: full-width forms East Asian input methods type (U+FF1D U+FF0B U+FF0D U+FF20), which Excel under a Japanese or
#: Chinese locale takes as = + - @. (thematiq_cli.render has a copy; tests/unit/thematic/test_verbatims.py holds
#: both to every export.)
FORMULA_START: Final = frozenset("=+-@\t\r\uff1d\uff0b\uff0d\uff20")


def formula_like(s: str) -> bool:
    """Whether ``s`` starts with one of FORMULA_START, also behind what a spreadsheet may drop or skip on the way in:
    spaces of any kind, control characters (a NUL, a line feed: the xlsx writer drops the illegal ones, and the CSV
    kept "\\x00=1+1" bare) and invisible format characters (a zero-width space, a byte-order mark, a direction
    mark). Such a text gets the quote too (review46); nothing else changes. (thematiq_cli.render has a copy.)"""
    for ch in s:
        if ch in FORMULA_START:
            return True
        if not (ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zs")):
            return False
    return False


def _cell(value: Any) -> str:
    # Spreadsheet formula injection: a cell starting with one of FORMULA_START is executed by Excel.
    s = "" if value is None else str(value)
    return "'" + s if formula_like(s) else s


def _meta_cell(value: Any) -> str:
    """A metadata value: a JSON number as written (it cannot hold a formula, and "'-3" would be text in Excel);
    anything else through the formula guard."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return insight.meta_text(value)
    return _cell(insight.meta_text(value))


def _score(value: Any) -> str:
    return f"{float(value):.4f}" if isinstance(value, int | float) and not isinstance(value, bool) else ""


class CsvWriter:
    """``csv.writer``'s RFC 4180 rows (QUOTE_MINIMAL, CRLF), and a field that holds a ";" is quoted too (review46): a
    reader that also splits on ";" (LibreOffice Calc with both separators ticked) took "x;=WEBSERVICE(CHAR(104));y",
    unquoted, as two cells, the second the live formula =WEBSERVICE(CHAR(104)). Quoted, the field stays whole; the
    header, ids and numbers stay as they were. (thematiq_cli.render has a copy.)"""

    def __init__(self, out: io.StringIO) -> None:
        self._out, self._csv = out, csv.writer(out, lineterminator="\r\n")

    def writerow(self, row: Any) -> None:
        if any(";" in v for v in row if isinstance(v, str)):
            self._out.write(",".join(_csv_field(v) for v in row) + "\r\n")
        else:
            self._csv.writerow(row)  # the common row, at the C writer's speed


def _csv_field(value: Any) -> str:
    s = "" if value is None else str(value)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',";\r\n') else s


def metadata_columns(keys: list[str], fixed: tuple[str, ...]) -> list[str]:
    """A metadata key is its own column header, unless it is already a fixed column's name: then ``metadata.`` is
    prefixed until the name is no column's and no other key's (keys ``text`` and ``metadata.text`` are the columns
    ``metadata.metadata.text`` and ``metadata.text``), so every header is unique.
    (thematiq_cli.render.metadata_columns is the same rule for the CLI's CSV.)"""
    taken = set(fixed) | set(keys)
    names: list[str] = []
    for k in keys:
        name = k
        if k in fixed:
            name = f"metadata.{k}"
            while name in taken:
                name = f"metadata.{name}"
            taken.add(name)
        names.append(name)
    return names


def render_csv(doc: dict[str, Any], data: Any = None) -> tuple[str, bytes]:
    """One row per (response, theme); a response in ``other``/``unusable`` gets one row with an empty theme.

    With the job's stored input (``data``), rows follow the submitted order and carry ``text`` and one column
    per metadata key after the fixed ones, so a spreadsheet needs no join back to the survey file.
    """
    labels = {t["id"]: t["label"] for t in doc.get("themes", [])}
    rows = verbatims.join(doc, data) if data is not None else [verbatims.Joined({}, a) for a in doc.get("assignments", [])]
    keys = verbatims.metadata_keys(rows)
    # More than 12 themes: the row's theme's broad theme, so the CSV alone gives a broad theme's count (its distinct
    # responses; with multi_label a response counts in the broad theme of each of its themes, as theme=p1 lists it).
    level = verbatims.Labels(doc)
    broad = BROAD_CSV_COLUMNS if (doc.get("levels") or {}).get("broad") == "parents" else ()
    buf = io.StringIO()
    w = CsvWriter(buf)
    # Last, after the metadata: a reader that addresses text and the metadata by position keeps its columns.
    w.writerow([*CSV_COLUMNS, *([] if data is None else ["text"]),
                *(_cell(c) for c in metadata_columns(keys, (*CSV_COLUMNS, "text", *broad))), *broad])
    for r in rows:
        a = r.assignment or {"response_id": r.item.get("id"), "bucket": "unusable", "themes": []}
        meta = r.item.get("metadata") or {}
        tail = ([] if data is None else [_cell(r.item.get("text") or "")]) + [_meta_cell(meta.get(k)) for k in keys]
        codes = ";".join(c["name"] for c in (a.get("seed_codes") or []))
        refs = a.get("themes") or [None]
        for ref in refs:
            tid = ref["theme_id"] if ref else ""
            conf = f"{ref['confidence']:.3f}" if ref else ""
            w.writerow(
                [
                    _cell(a["response_id"]),
                    tid,
                    _cell(labels.get(tid, "")),
                    conf,
                    a["bucket"],
                    a.get("reason") or "",
                    _cell(codes),
                    (a.get("sentiment") or {}).get("label", ""),
                    # A number we computed (not user text), so a leading "-" is a sign, not a formula.
                    _score((a.get("sentiment") or {}).get("score")),
                    *tail,
                    *([level.parent_of.get(tid, ""), _cell(level.label(level.parent_of.get(tid)))] if broad else []),
                ]
            )
    return "text/csv; charset=utf-8", buf.getvalue().encode("utf-8")


def _md(s: str) -> str:
    # Data (quotes, LLM labels, codebook names) renders as its text only: no HTML, links, images or new rows.
    return mdsafe.text(s)


def _count_confidence(choice: dict[str, Any]) -> str:
    """One line on how sure the theme count is (schema 1.1; empty for older results). The other readings only
    when there is no ``summary`` (before schema 1.2): the summary names them ("...; the data also support 11
    themes"), and the report said them twice."""
    label = choice.get("confidence_label")
    if not label:
        return ""
    alt = [] if choice.get("summary") else choice.get("alternatives") or []
    readings = f" Other readings the data support about as well: {', '.join(f'{a} themes' for a in alt)}." if alt else ""
    if choice.get("criterion") == "prior":
        head = "**Theme count: low confidence — structure is weak, the count is a judgement.**"
    else:
        head = f"**Theme count confidence: {label}** ({choice.get('confidence', 0):.2f})."
    return head + readings


def _cell_md(cell: dict[str, Any], small_n: bool = False) -> str:
    lift = cell.get("lift")
    text = f"{cell['share']:.0%}" + (f" ×{lift:.1f}" if isinstance(lift, int | float) else "")
    # † marks a cell tested exactly (schema 1.4): a short mark, since a small segment has one in most cells. A small
    # n group is not tested (the legend says so; its cells' Fisher p stays in the JSON): no † there (review46).
    tested = cell.get("test") == "fisher" and not small_n
    return (f"**{text}**" if cell.get("significant") else text) + (" †" if tested else "")


def _small_groups_md(b: dict[str, Any]) -> str:
    """The legend's part for groups of a handful of answers, which are not tested (schema 1.5, insight.MIN_TESTED_N)."""
    if not any(g.get("small_n") for g in b.get("groups", [])):
        return ""
    return (f"; *small n*: the group or the rest has fewer than "
            f"{(b.get('testing') or {}).get('min_n') or insight.MIN_TESTED_N} responses, not tested, never bold")


def _sentiment_md(doc: dict[str, Any]) -> list[str]:
    """The Sentiment section: per theme its labels' counts and its mean (or NPS), and which source scored it."""
    lines: list[str] = []
    themes = doc.get("themes", [])
    if not (doc.get("sentiment") and any(t.get("sentiment") for t in themes)):
        return lines
    src = doc["sentiment"]
    by = {"metadata": f"the rating field {_md(str(src.get('field')))}{_scale_md(src)}", "lexicon": "the VADER lexicon",
          "model": "the sentiment model over the embeddings", "llm": "the LLM"}.get(str(src.get("source")), "?")
    nps = src.get("scale") == "score10"
    # What the Mean column is on: a theme of 1-5 star ratings read "+0.01" with no scale (no mean of stars).
    scale = ("NPS: % promoters (9-10) minus % detractors (0-6)." if nps else
             "Mean: of the responses' scores, from -1 (negative) to +1 (positive), 0 neutral.")
    lines += ["", "## Sentiment", "", f"Per response, by {by} (source: {_md(str(src.get('source')))})."
              + (f" {_md(str(src['note']))}." if src.get("note") else "") + f" {scale}", "",
              "| Theme | Positive | Neutral | Negative | " + ("NPS |" if nps else "Mean |"),
              "|---|---:|---:|---:|---:|"]
    for t in themes:
        s = t.get("sentiment") or {}
        mean = s.get("nps") if nps else s.get("mean")
        # NPS to one decimal, as the impact table prints the same theme's NPS (it said -95 there and -95.2 here).
        shown = "" if mean is None else _num(mean, nps)
        lines.append(f"| {_md(t['label'])} | {s.get('positive', 0)} | {s.get('neutral', 0)} | "
                     f"{s.get('negative', 0)} | {shown} |")
    return lines


def _insight_md(doc: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """Sentiment per theme, breakdowns (share and lift per segment; bold = significant) and the comparison."""
    lines: list[str] = _sentiment_md(doc)
    themes = doc.get("themes", [])
    for b in doc.get("breakdowns") or []:
        groups = b.get("groups", [])
        lines += ["", f"## By {_md(b['field'])}", "",
                  "Share of each group's responses, lift against the rest; **bold**: significant "
                  "(Benjamini–Hochberg q < 0.05)"
                  + ("; †: Fisher's exact test, since an expected count is below "
                     f"{_num_plain(b['testing'].get('exact_below'))} (too few answers for the z-test's normal "
                     "approximation)" if isinstance(b.get("testing"), dict) else "")
                  + _small_groups_md(b) + ".", "",
                  "| Theme | " + " | ".join(f"{_md(insight.heading(g))} (n={g['n']}{', small n' if g.get('small_n') else ''})"
                                           for g in groups) + " |",
                  "|---|" + "---:|" * len(groups)]
        # Every theme, as the dashboard, the CLI and the xlsx list them: the table stopped after 30 without a word.
        for tid in (t["id"] for t in themes):
            cells = []
            for g in groups:
                cell = next((c for c in g["themes"] if c["theme_id"] == tid), None)
                cells.append(_cell_md(cell, bool(g.get("small_n"))) if cell else "")
            lines.append(f"| {_md(labels.get(tid, tid))} | " + " | ".join(cells) + " |")
    comparison = doc.get("comparison")
    if comparison:
        how = {"centroids": "both waves coded with the earlier job's themes (one instrument)",
               "prototypes": "now coded with prototypes of the earlier themes; then as the earlier job counted "
                             "them (approximate)"}.get(str(comparison.get("instrument")), "")
        lines += ["", "## Change since the compared job", "",
                  # The shares' denominators: the usable responses of each wave (not all that were submitted).
                  f"Then {comparison['n_then']} usable responses, now {comparison['n_now']}"
                  + (" (distinct answers: the earlier wave did not count copies of an answer, so this wave's are "
                     "left out here)" if comparison.get("copies") is False and doc.get("run", {}).get("counts", {}).get("duplicates") else "")
                  + (f"; {how}" if how else "") + "; **bold**: significant (two-proportion test, "
                  + ("weighted Benjamini–Hochberg q < 0.05, larger themes weighted more by their count in both "
                     "waves" if (comparison.get("testing") or {}).get("procedure") == "weighted-bh"
                     else "Benjamini–Hochberg q < 0.05")
                  + "); a new theme is not tested; *(exact)*: Fisher's exact test, since an expected count is "
                  "below 5 (too few answers for the z-test's normal approximation).", "",
                  *([f"**Warning**: {_md(str(comparison['warning']))}", ""] if comparison.get("warning") else []),
                  *([_md(far), ""] if (far := far_note(comparison)) else []),
                  "| Theme | Then | Now | Change | |", "|---|---:|---:|---:|---|"]
        # Themes a codebook edit split (or that took a split-off): their earlier count covered other answers.
        then_of = comparison.get("then") or {}
        split = {t for t, v in then_of.items() if v.get("split_into")} | {
            c for v in then_of.values() for c in v.get("split_into") or () if c in then_of}
        for r in comparison.get("themes", []):
            if r.get("change") is None:
                # A new theme has no share then; discover mode's gone theme has one but is not tested.
                then = "—" if r["status"] == "new" else f"{r['share_then']:.1%}"
                status = r["status"] + (", split: not tested" if r["theme_id"] in split else "")
                lines.append(f"| {_md(r['label'])} | {then} | {r['share_now']:.1%} | — | {status} |")
                continue
            # A change in share is in percentage points ("+4.9 pts", as the dashboard says): "+4.9%" read as a
            # relative change for a share that went from 4.6% to 9.4%.
            change = f"{r['change'] * 100:+.1f} pts"
            exact = " *(exact)*" if r.get("test") == "fisher" else ""
            lines.append(f"| {_md(r['label'])} | {r['share_then']:.1%} | {r['share_now']:.1%} | "
                         f"{f'**{change}**' if r['significant'] else change}{exact} | {r['status']} |")
        lines += _families_md(comparison, labels)
    lines += _impact_md(doc.get("impact"))
    return lines


#: What a family row is, in every view that lists them (the CLI and the dashboard have copies).
FAMILIES_NOTE: Final = (
    "Families of near earlier themes, each tested as one share (its themes' answers pooled; Benjamini–Hochberg over "
    "the families): a change spread over near themes, or a theme a codebook edit split, is tested here")


def family_names(group: dict[str, Any], labels: dict[str, str], then: dict[str, Any]) -> str:
    """A family's themes by name ("Late delivery + Slow courier"): the label now, else the earlier wave's."""
    return " + ".join(labels.get(t) or str((then.get(t) or {}).get("label") or t) for t in group.get("theme_ids") or [])


def _families_md(comparison: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """``comparison.groups`` (schema 1.2, waves.family_tests) as a table. Stored since research23 and shown by no
    view: a significant change of a family, the only test of a theme a split took out of the per-theme rows
    ("split: not tested"), was in the JSON alone."""
    groups = [g for g in comparison.get("groups") or [] if isinstance(g, dict)]
    if not groups:
        return []
    then = comparison.get("then") or {}
    lines = ["", FAMILIES_NOTE + "; **bold**: significant, *(exact)*: Fisher's exact test.", "",
             "| Family | Then | Now | Change |", "|---|---:|---:|---:|"]
    for g in groups:
        change = f"{g['change'] * 100:+.1f} pts"
        exact = " *(exact)*" if g.get("test") == "fisher" else ""
        lines.append(f"| {_md(family_names(g, labels, then))} | {g['share_then']:.1%} | {g['share_now']:.1%} | "
                     f"{f'**{change}**' if g.get('significant') else change}{exact} |")
    return lines


#: How many answers of an unchanged wave are far from every earlier theme anyway: the radius is a low quantile of
#: the earlier wave's own cosines, so some new phrasings fall outside it (bench/waves.py's check seeds: 52-109 of
#: ~2,110, 2.5-5.2 %). A researcher reads the far count against this, not against 0, and it depends on the wave's
#: size and the data: random halves compared with each other (review46u, an unchanged wave each) had 14-25 of ~200
#: far on samples/feedback.csv (7.1, 8.0, 12.0, 12.5 %; alternate rows and seeds 1-3), and 10-33 of 300 on the
#: drugs.com reviews (bench/thematic.py's drugs: 3.3, 6.0, 11.0 %; its own train/test files, 356 then 244 now:
#: 4.5 %), so "an unchanged wave has 2-5 %" alone read a null small wave as something emerging. Both sizes are named.
FAR_TYPICAL: Final = "2-5 % at about 2,100 answers a wave, 3-13 % at 200-350"


def far_note(comparison: dict[str, Any]) -> str | None:
    """The inherit comparison's far answers in a sentence: how many of the new wave are unlike every earlier theme,
    and what became of them. The result stored ``far`` since schema 1.2 and no view showed it, so an emerging
    topic too small to be a new theme was invisible. (The CLI has a copy: thematiq_cli/render.py.)"""
    far, n_now = comparison.get("far"), comparison.get("n_now")
    if not isinstance(far, int) or not isinstance(n_now, int) or n_now <= 0:
        return None
    new = sum(1 for r in comparison.get("themes") or [] if r.get("status") == "new")
    fate = (f"those that cluster together form the {new} new theme{'s' if new > 1 else ''}" if new
            else "too few cluster together to form a new theme")
    return (f"{far} of the {n_now} answers now ({far / n_now:.1%}) are far from every earlier theme (an unchanged "
            f"wave has {FAR_TYPICAL}); {fate}, the rest are coded to their nearest earlier theme or to no theme.")


#: How a rating field's scale reads, in words (sentiment.scale).
_SCALE_WORDS = {"stars": "1–5 stars", "score10": "0–10, as NPS groups", "words": "positive / neutral / negative",
                "likert7": "1–7", "rating10": "1–10", "rating0to5": "0–5"}


def _scale_md(src: dict[str, Any]) -> str:
    """" (0–10, as NPS groups, declared)": the scale that read the rating, and whether it was declared (1.4)."""
    named = _SCALE_WORDS.get(str(src.get("scale")))
    if not named:
        return ""
    how = {"declared": ", declared", "inferred": ", inferred from the values"}.get(str(src.get("scale_from")), "")
    return f" ({named}{how})"


def _num_plain(x: Any) -> str:
    return f"{x:g}" if isinstance(x, int | float) else f"{insight.MIN_EXPECTED:g}"


def _num(x: Any, nps: bool) -> str:
    if not isinstance(x, int | float):
        return "—"
    return f"{x:+.1f}" if nps else f"{x:+.2f}"


def _themes_word(imp: dict[str, Any]) -> str:
    k = len(imp.get("themes") or [])
    return f"{k} theme{'' if k == 1 else 's'}"


def interval_word(imp: dict[str, Any]) -> str:
    """How ``impact.interval`` made the intervals, in the legend's words (stats46: "permutation")."""
    return ("Welch's, critical values from 999 permutations of the scores" if imp.get("interval") == "permutation"
            else "Welch's t")


def score_word(scale: Any) -> str:
    """What a non-NPS score's mean is of: "CSAT", "rating (0–5)" for a declared range (1.7), else "score"."""
    if scale == "csat":
        return "CSAT"
    return f"rating ({str(scale).replace('-', '–')})" if scale in impact.RANGES else "score"


def _impact_md(imp: dict[str, Any] | None) -> list[str]:
    """Each theme's impact on the score: overall minus the score without the theme, with its 95 % interval."""
    if not imp:
        return []
    nps = imp.get("scale") == "nps"
    what = "NPS" if nps else "mean " + score_word(imp.get("scale"))
    overall = imp.get("overall")
    lines = ["", f"## Impact on {_md(str(imp['key']))}", "",
             f"Overall {what} {'—' if overall is None else (f'{overall:.1f}' if nps else f'{overall:.2f}')} "
             f"over {imp['n']} scored responses. Impact: the overall {what} minus the {what} of the responses "
             f"without the theme (negative: the theme costs points), with its 95 % interval ({interval_word(imp)}); **bold**: "
             # Unlike the breakdowns and the waves (Benjamini-Hochberg), the intervals are not corrected for the
             # number of themes: with scores independent of themes (20 themes, 400 responses, 100 runs) 77 % of
             # runs had at least one theme bold. The reader is told so.
             f"the interval excludes 0 (each interval is per theme, not corrected for the {_themes_word(imp)}: "
             "with no effect at all about 1 theme in 20 would still be bold). "
             # Percentile intervals of a handful of responses exclude 0 far more often than 5 % (impact.MIN_N).
             f"*(small n)*: fewer than {imp.get('min_n') or impact.MIN_N} scored responses, never bold.", "",
             # One theme per response: impacts are relative to the other themes together (schema 1.5).
             *([f"*Note*: {_md(str(imp['note']))}", ""] if imp.get("note") else []),
             f"| Theme | Responses | {what} | Impact | 95 % interval |", "|---|---:|---:|---:|---|"]
    label_of = {str(t.get("theme_id")): str(t.get("label")) for t in imp.get("themes", [])}
    for t in imp.get("themes", []):
        lo, hi = t.get("ci_low"), t.get("ci_high")
        sure = impact.starred(t)
        cell = _num(t.get("impact"), nps)
        if t.get("explained_by"):  # one theme per response: excludes 0 only against these themes (schema 1.5)
            cell += " *(against " + ", ".join(_md(label_of.get(str(x), str(x))) for x in t["explained_by"]) + " only)*"
        score = t.get("score")
        lines.append(f"| {_md(t['label'])} | {t['n']}{' *(small n)*' if t.get('small_n') else ''} | "
                     f"{'—' if score is None else (f'{score:.1f}' if nps else f'{score:.2f}')} | "
                     f"{f'**{cell}**' if sure else cell} | {_num(lo, nps)} … {_num(hi, nps)} |")
    return lines


def multi_label_note(doc: dict[str, Any]) -> str | None:
    """With ``multi_label``, how many responses have more than one theme, and what that does to the counts: the
    themes' (and broad themes') shares add up to more than 100 %, which nothing said (thematiq_cli.render has a
    copy of this sentence, held equal by a test)."""
    n = sum(1 for a in doc.get("assignments") or [] if len(a.get("themes") or []) > 1)
    if not n:
        return None
    return (f"{n} response{'s have' if n != 1 else ' has'} more than one theme: each counts in every one of its "
            "themes (and in each broad theme one of them is in), so the shares add up to more than 100%.")


def copies_note(n: int) -> str:
    """What the usable count holds besides distinct answers (``run.counts.duplicates``). (The CLI has a copy:
    thematiq_cli/render.py.)"""
    return (f"The usable responses include {n} cop{'y' if n == 1 else 'ies'} of an earlier answer, each counted with "
            "that answer's themes and its own metadata, never clustered or quoted (count_duplicates=false leaves "
            "them out).")


#: The codebook edits that change how many themes there are (a rename does not).
_RESHAPING_EDITS: Final = frozenset({"merge", "split", "delete"})


def count_after_edits(doc: dict[str, Any]) -> str | None:
    """The count as it is after codebook edits that merged, split or deleted themes, in the summary's words ("After
    2 codebook edits: 14 themes in 7 groups."), or None. ``run.theme_count.summary`` is the analysis's count and
    stays so; beside "15 themes" in the report and the page it read as a count that did not match. (The CLI and
    the dashboard have copies: thematiq_cli/render.py, web/static/app.js.)"""
    edits = [e for e in doc.get("edits") or [] if isinstance(e, dict) and e.get("op") in _RESHAPING_EDITS]
    if not edits:
        return None
    k, levels = len(doc.get("themes") or []), doc.get("levels") or {}
    broad, fine = int(levels.get("broad_count") or 0), int(levels.get("fine_count") or 0)
    head = f"{k} theme{'' if k == 1 else 's'}"
    if levels.get("broad") == "parents" and broad:
        head += f" in {broad} group{'' if broad == 1 else 's'}"
    elif levels.get("fine") == "subthemes" and fine > k:
        head += f", with {fine} sub-themes under them"
    n = len(edits)
    return f"After {n} codebook edit{'' if n == 1 else 's'} (merge, split or delete): {head}."


def render_md(doc: dict[str, Any]) -> tuple[str, bytes]:
    run = doc.get("run", {})
    counts = run.get("counts", {})
    lines = ["# Thematic analysis", ""]
    lines.append(
        f"{counts.get('responses', 0)} responses, {counts.get('usable', 0)} usable, "
        f"{len(doc.get('themes', []))} themes, {counts.get('other', 0)} in *other*."
    )
    if counts.get("duplicates"):
        lines += ["", copies_note(int(counts["duplicates"]))]
    if (multi := multi_label_note(doc)) is not None:
        lines += ["", multi]
    choice = run.get("theme_count", {})
    if choice:
        sure = _count_confidence(choice)
        if sure:
            lines += ["", sure]
        why = choice.get("explanation", "")
        if choice.get("summary"):
            after = count_after_edits(doc)
            lines += ["", f"**Theme count:** {_md(choice['summary'])}" + (f" {_md(after)}" if after else "")]
            why = why.removeprefix(f"{choice['summary']} Why: ")
        lines += ["", f"**Why this many themes:** {_md(why)}"]
    levels = doc.get("levels") or {}
    parents = doc.get("parents") or []
    labels = {t["id"]: t["label"] for t in doc.get("themes", [])}
    if levels.get("broad") == "parents" and parents:
        lines += ["", f"## Broad themes ({len(parents)})", "", "| Broad theme | Responses | Share | Themes |", "|---|---:|---:|---|"]
        for p in parents:
            kids = ", ".join(labels.get(c, c) for c in p.get("children", []))
            share = p.get("share")
            lines.append(
                f"| {_md(p['label'])} | {p['count']} | {share:.1%} | {_md(kids)} |"
                if isinstance(share, (int, float))
                else f"| {_md(p['label'])} | {p['count']} | | {_md(kids)} |"
            )
    lines += ["", "| Theme | Responses | Share | Keywords |", "|---|---:|---:|---|"]
    for t in doc.get("themes", []):
        lines.append(f"| {_md(t['label'])} | {t['count']} | {t['share']:.1%} | {_md(', '.join(t['keywords'][:6]))} |")
    subs: dict[str, list[dict[str, Any]]] = {}
    for st in doc.get("subthemes") or []:
        subs.setdefault(st["parent"], []).append(st)
    for t in doc.get("themes", []):
        lines += ["", f"## {_md(t['label'])} ({t['count']}, {t['share']:.1%})", "", _md(t["description"]), ""]
        if subs.get(t["id"]):
            lines += ["Sub-themes:", ""]
            lines += [f"- {_md(st['label'])}: {st['count']} ({st['share']:.1%})" for st in subs[t["id"]]]
            lines.append("")
        for q in t["quotes"]:
            lines.append(f"> {_md(q['text'])}")
            lines.append("")
    lines += _insight_md(doc, labels)
    if doc.get("seed_themes"):
        lines += ["", "## Codebook", "", "| Code | Responses | Share |", "|---|---:|---:|"]
        for s in doc["seed_themes"]:
            lines.append(f"| {_md(s['name'])} | {s['count']} | {s['share']:.1%} |")
    unusable = counts.get("unusable", {})
    if any(unusable.values()):
        lines += ["", "## Not analysed", ""] + [f"- {k.replace('_', ' ')}: {v}" for k, v in unusable.items() if v]
    llm = run.get("llm", {})
    lines += [
        "",
        "---",
        f"Embedding model: {_md(run.get('embedding_model', {}).get('name', ''))}; "
        f"LLM: {_md(llm.get('model')) if llm.get('used') else 'not used'}.",
    ]
    return "text/markdown; charset=utf-8", ("\n".join(lines) + "\n").encode("utf-8")
