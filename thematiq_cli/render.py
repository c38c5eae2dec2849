"""Plain-text views of jobs, job lists and thematic results, sized to the terminal."""

from __future__ import annotations

import csv
import json
import shutil
import textwrap
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from thematiq_client import metadata_text

from .terminal import visible
from .waiting import fmt_elapsed


def term_width(default: int = 100) -> int:
    return max(60, shutil.get_terminal_size((default, 20)).columns)


def clip(text: str, width: int) -> str:
    """One line, at most ``width`` characters, with an ellipsis when cut."""
    one = visible(" ".join(str(text).split()))
    return one if len(one) <= width else one[: max(0, width - 1)] + "…"


def _cell(text: str) -> str:
    return visible(text).replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """A simple aligned table; the last column takes the rest of the line and is clipped. Cells are data: each
    prints as one line of visible text (``thematiq_cli.terminal``)."""
    headers = [_cell(h) for h in headers]
    rows = [[_cell(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lead = sum(widths[:-1]) + 2 * (len(headers) - 1)
    widths[-1] = max(10, term_width() - 1 - lead)

    def fmt(row: Sequence[str]) -> str:
        cells = []
        for i, cell in enumerate(row):
            cell = clip(cell, widths[i]) if i == len(row) - 1 else cell
            cells.append(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]))
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * min(w, 60) for w in widths)
    return "\n".join([fmt(headers), rule, *(fmt(r) for r in rows)])


def _progress_cell(job: dict[str, Any]) -> str:
    p = job.get("progress") or {}
    stage, processed, total = p.get("stage") or "", p.get("processed") or 0, p.get("total")
    if isinstance(total, int) and total > 0:
        return f"{stage} {processed}/{total}".strip()
    return str(stage)


def job_list(items: Sequence[dict[str, Any]]) -> str:
    rows = [
        [
            str(j.get("id", "")),
            str(j.get("pipeline", "")),
            str(j.get("status", "")),
            _progress_cell(j),
            str(j.get("created_at") or ""),
            (j.get("error") or {}).get("message", "") if j.get("error") else "",
        ]
        for j in items
    ]
    return table(["ID", "PIPELINE", "STATUS", "PROGRESS", "CREATED", "ERROR"], rows)


#: ``thematiq result --format`` choices: what the thematic pipeline's result downloads as (the service's own list is
#: ``json`` plus the pipeline's renderers and exports; other pipelines may offer only ``json``).
RESULT_FORMATS = ("json", "md", "csv", "xlsx", "codebook")


def result_formats(pipeline: object) -> str:
    """The ``--format`` values to suggest for a job of ``pipeline``: all of them for thematic, else ``json``."""
    return "|".join(RESULT_FORMATS) if pipeline == "thematic" else "json"


def job_details(job: dict[str, Any]) -> str:
    """A readable summary of one job (``--json`` gives the raw document instead)."""
    p = job.get("progress") or {}
    lines = [
        f"job        {job.get('id')}",
        f"pipeline   {job.get('pipeline')}",
        f"status     {job.get('status')}" + ("  (cancel requested)" if job.get("cancel_requested") else ""),
    ]
    if p.get("stage") or p.get("processed"):
        total = p.get("total")
        count = f"{p.get('processed', 0)}/{total}" if total else f"{p.get('processed', 0)}"
        lines.append(f"progress   {p.get('stage', '')} {count}  {p.get('message') or ''}".rstrip())
    lines.append(f"attempts   {job.get('attempts')}/{job.get('max_attempts')}")
    for key in ("created_at", "started_at", "heartbeat_at", "finished_at"):
        if job.get(key):
            lines.append(f"{key.replace('_at', ''):<10} {job[key]}")
    if job.get("params"):
        params = ", ".join(f"{k}={v}" for k, v in sorted(job["params"].items()) if v is not None)
        lines.append(f"params     {params}")
    err = job.get("error")
    if err:
        lines.append(f"error      {err.get('type')}: {err.get('message')}")
    if job.get("usage"):
        lines.append("usage      " + ", ".join(f"{k}={v}" for k, v in sorted(job["usage"].items())))
    result = (job.get("links") or {}).get("result")
    if result:
        lines.append(f"result     {result}  (thematiq result {job.get('id')} [--format {result_formats(job.get('pipeline'))}])")
    return visible("\n".join(lines))


def themes_table(result: dict[str, Any], quote_width: int | None = None) -> str:
    """The themes of a thematic result: a numbered table, each row followed by one quote."""
    themes = result.get("themes") or []
    width = term_width()
    out: list[str] = []
    counts = ((result.get("run") or {}).get("counts")) or {}
    if counts:
        unusable = counts.get("unusable") or {}
        unusable_total = sum(int(v) for v in unusable.values())
        detail = ", ".join(f"{k} {v}" for k, v in sorted(unusable.items()) if v)
        out.append(
            f"{counts.get('responses', '?')} responses: {counts.get('themed', '?')} in {len(themes)} themes, "
            f"{counts.get('other', 0)} other, {unusable_total} unusable" + (f" ({detail})" if detail else "")
        )
        if counts.get("duplicates"):
            out.append(copies_note(int(counts["duplicates"])))
        if (multi := multi_label_note(result)) is not None:
            out.append(multi)
        choice = (result.get("run") or {}).get("theme_count") or {}
        if choice.get("confidence_label"):
            # schema 1.1: how sure the count is, the other readings (unless the summary in the explanation below
            # names them: schema 1.2), and the two levels.
            alt = [] if choice.get("summary") else choice.get("alternatives") or []
            sure = (
                "low: structure is weak, the count is a judgement"
                if choice.get("criterion") == "prior"
                else f"{choice['confidence_label']} ({float(choice.get('confidence') or 0):.2f})"
            )
            out.append(f"Count confidence: {sure}" + (f"; other readings: {', '.join(map(str, alt))} themes" if alt else ""))
        levels = result.get("levels") or {}
        if levels and (choice.get("confidence_label") or choice.get("criterion") in ("fixed", "single")):
            # A count the data did not choose has no confidence (num_themes given, too few responses), but its
            # levels are the analysis's all the same (review46).
            out.append(levels_line(levels))
        if choice.get("explanation"):
            after = count_after_edits(result)
            out.append(textwrap.fill("Theme count: " + str(choice["explanation"]), width=min(width, 110)))
            if after:
                out.append(after)
        out.append("")
    if not themes:
        out.append("(no themes)")
        return "\n".join(out)
    out.extend(_broad_themes(result))
    label_w = min(40, max(len("THEME"), *(len(str(t.get("label", ""))) for t in themes)))
    rows = []
    quotes = []
    for i, t in enumerate(themes, start=1):
        share = t.get("share")
        rows.append([
            str(i),
            clip(str(t.get("label", "")), label_w),
            str(t.get("count", "")),
            f"{share:.1%}" if isinstance(share, (int, float)) else "",
            ", ".join(str(k) for k in (t.get("keywords") or [])[:6]),
        ])
        q = (t.get("quotes") or [{}])[0]
        quotes.append(str(q.get("text", "")) if q else "")
    rendered = table(["#", "THEME", "COUNT", "SHARE", "KEYWORDS"], rows, right=(0, 2, 3)).split("\n")
    out.extend(rendered[:2])
    indent = " " * (len(str(len(themes))) + 2)
    qw = quote_width or max(20, width - 1 - len(indent) - 2)
    for row_line, quote in zip(rendered[2:], quotes, strict=True):
        out.append(row_line)
        if quote:
            out.append(f"{indent}“{clip(quote, qw - 2)}”")
    return visible("\n".join(out))


def _broad_themes(result: dict[str, Any]) -> list[str]:
    """More than 12 themes: the broad themes (parents) with their counts and themes, as the report's "Broad themes"
    table and the dashboard list them; the CLI named only how many there were. A count is its responses with any of
    its themes."""
    parents = result.get("parents") or []
    if (result.get("levels") or {}).get("broad") != "parents" or not parents:
        return []
    labels = {t.get("id"): str(t.get("label", t.get("id"))) for t in result.get("themes") or []}
    rows = [[p.get("id", ""), clip(str(p.get("label", "")), 40), str(p.get("count", "")),
             f"{p['share']:.1%}" if isinstance(p.get("share"), int | float) else "",
             ", ".join(labels.get(c, str(c)) for c in p.get("children") or [])] for p in parents]
    return [table(["ID", "BROAD THEME", "COUNT", "SHARE", "THEMES"], rows, right=(2, 3)), ""]


def count_after_edits(result: dict[str, Any]) -> str | None:
    """What codebook edits that merged, split or deleted themes left, in the count summary's words: the CLI's copy of
    ``pipelines.thematic.render.count_after_edits`` (a unit test holds them equal)."""
    edits = [e for e in result.get("edits") or [] if isinstance(e, dict) and e.get("op") in ("merge", "split", "delete")]
    if not edits:
        return None
    k, levels = len(result.get("themes") or []), result.get("levels") or {}
    broad, fine = int(levels.get("broad_count") or 0), int(levels.get("fine_count") or 0)
    head = f"{k} theme{'' if k == 1 else 's'}"
    if levels.get("broad") == "parents" and broad:
        head += f" in {broad} group{'' if broad == 1 else 's'}"
    elif levels.get("fine") == "subthemes" and fine > k:
        head += f", with {fine} sub-themes under them"
    n = len(edits)
    return f"After {n} codebook edit{'' if n == 1 else 's'} (merge, split or delete): {head}."


def elapsed_between(job: dict[str, Any]) -> str | None:
    """Wall time from creation to finish, for the end-of-wait summary."""
    from datetime import datetime

    try:
        start = datetime.fromisoformat(str(job["created_at"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(job["finished_at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return None
    return fmt_elapsed((end - start).total_seconds())


def _breakdown_cell(cell: dict[str, Any] | None, small_n: bool = False) -> str:
    if cell is None:
        return ""
    lift = cell.get("lift")
    text = f"{float(cell['share']):.0%}" + (f" x{float(lift):.1f}" if isinstance(lift, int | float) else "")
    # A star marks a significant cell (Benjamini-Hochberg q < 0.05), as the Markdown report's bold does; a dagger
    # a cell tested by Fisher's exact test (schema 1.4), as the report marks it; never in a small n group, which is not
    # tested (the legend says so; review46).
    exact = cell.get("test") == "fisher" and not small_n
    return text + ("*" if cell.get("significant") else " ") + ("†" if exact else " ")


#: The names of a breakdown's synthetic groups (the service's pipelines.thematic.insight.Synthetic).
SYNTHETIC_GROUPS = {"missing": "(missing)", "other": "other values"}


def group_heading(group: dict[str, Any]) -> str:
    """A breakdown group as its column heading reads: a synthetic group (schema 1.6 ``synthetic``; before 1.6 a group
    named "(missing)" or "other values") by its name, a real value as it is unless it reads as a synthetic group's
    name, then in double quotes. The service's reports write it so: pipelines.thematic.insight.heading (a test holds
    the two equal)."""
    value = str(group.get("value"))
    if "synthetic" in group:
        synthetic = group["synthetic"]
    else:
        synthetic = next((k for k, v in SYNTHETIC_GROUPS.items() if v == value), None)
    if synthetic is not None:
        return SYNTHETIC_GROUPS.get(str(synthetic), value)
    return f'"{value}"' if value.strip('"') in SYNTHETIC_GROUPS.values() else value


def breakdown_table(result: dict[str, Any], field: str) -> str:
    """One breakdown of a thematic result: a row per theme, a column per group (share, lift, * significant)."""
    breakdown = next((b for b in result.get("breakdowns") or [] if b.get("field") == field), None)
    if breakdown is None:
        fields = ", ".join(str(b.get("field")) for b in result.get("breakdowns") or []) or "none"
        raise KeyError(f"no breakdown by {field!r} in this result (breakdowns: {fields})")
    groups = breakdown.get("groups") or []
    headers = ["Theme", *(f"{clip(group_heading(g), 18)} n={g['n']}{' small' if g.get('small_n') else ''}"
                          for g in groups)]
    rows = []
    for theme in result.get("themes") or []:
        cells = [_breakdown_cell(next((c for c in g["themes"] if c["theme_id"] == theme["id"]), None),
                                 bool(g.get("small_n"))) for g in groups]
        rows.append([clip(str(theme.get("label", theme["id"])), 40), *cells])
    # The theme column is last in ``table``'s sense (clipped to the line): put it first by hand instead.
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(widths[i]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(headers)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip())
    kind = breakdown.get("kind")
    note = f"By {field} ({kind}): share of each group, x lift against the rest, * significant (BH q < 0.05)."
    if isinstance(breakdown.get("testing"), dict):  # schema 1.4: small cells are tested exactly
        below = breakdown["testing"].get("exact_below")
        note += (f" †: Fisher's exact test, an expected count is below "
                 f"{below:g}." if isinstance(below, int | float) else " †: Fisher's exact test.")
    if any(g.get("small_n") for g in groups):  # schema 1.5: a group (or its rest) under min_n is not tested
        min_n = (breakdown.get("testing") or {}).get("min_n", 10)
        note += f" small: fewer than {min_n} responses in the group or its rest, not tested (never *)."
    return visible("\n".join([note, "", *lines]))


#: One row per response. ``theme_ids`` / ``theme_labels``: every theme (primary first); ``broad_ids`` /
#: ``broad_labels``: every broad theme the response is in, in its themes' order, each once (multi_label: a response
#: counts in the broad theme of each of its themes, as the service's CSV has a ``broad_id`` per theme row and
#: ``theme=p1`` lists it). Until 2026-12-08 one column ``broad`` held the primary theme's broad theme only.
RESPONSE_CSV_COLUMNS = ("response_id", "text", "bucket", "reason", "theme_ids", "theme_labels", "confidence",
                        "broad_ids", "broad_labels", "fine", "sentiment", "sentiment_score")


def metadata_columns(keys: Sequence[str], fixed: tuple[str, ...]) -> list[str]:
    """A metadata key is its own column header, unless it is a fixed column's name: then ``metadata.`` is prefixed
    until the name is no column's and no other key's, so every header is unique (the service's export does the same:
    pipelines/thematic/render.py)."""
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


#: What makes a spreadsheet read a cell as a formula: = + - @, a tab or CR, and their full-width forms (Excel under
#: a Japanese or Chinese locale). The service's exports use the same set (pipelines/thematic/render.FORMULA_START).
FORMULA_START = frozenset("=+-@\t\r\uff1d\uff0b\uff0d\uff20")


def _safe(value: Any) -> str:
    # Spreadsheet formula injection: a cell starting with one of FORMULA_START is executed by Excel.
    s = "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "'" + s if formula_like(s) else s


def formula_like(s: str) -> bool:
    """Whether ``s`` starts with one of FORMULA_START, also behind spaces, control and invisible format characters
    (a NUL, a line feed, a zero-width space, a BOM), which a spreadsheet may drop or skip: the service's rule
    (pipelines/thematic/render.formula_like), copied (review46)."""
    for ch in s:
        if ch in FORMULA_START:
            return True
        if not (ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zs")):
            return False
    return False


def _meta_cell(value: Any) -> str:
    # A JSON number cannot hold a formula, and "'-3" would be text in Excel: numbers as written.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return metadata_text(value)
    return _safe(metadata_text(value))


def broad_themes(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Every broad theme of a ``/responses`` row ({id, label}), in its themes' order, each once: the primary theme's
    (the row's ``broad``) first, then the others' (``themes[].broad``, multi_label). A service before 2026-12-08
    sends no ``themes[].broad``: then the row's ``broad`` alone."""
    seen: dict[str, dict[str, Any]] = {}
    for link in [r.get("broad"), *(t.get("broad") for t in r.get("themes") or [])]:
        if isinstance(link, dict) and link.get("id") is not None:
            seen.setdefault(str(link["id"]), link)
    return list(seen.values())


def _csv_row(r: dict[str, Any], keys: Sequence[str]) -> list[str]:
    themes = r.get("themes") or []
    sentiment = r.get("sentiment") or {}
    score = sentiment.get("score")
    broad = broad_themes(r)
    return [
        _safe(str(r["id"])), _safe(r.get("text")), r.get("bucket") or "", r.get("reason") or "",
        _safe(";".join(t["theme_id"] for t in themes)), _safe(";".join(t["label"] for t in themes)),
        f"{themes[0]['confidence']:.3f}" if themes else "",
        # Ids are the service's (t3, p1) and labels user text at times (a renamed theme): both through the guard.
        _safe(";".join(str(b["id"]) for b in broad)), _safe(";".join(str(b.get("label", "")) for b in broad)),
        _safe((r.get("fine") or {}).get("id", "")), sentiment.get("label", ""),
        # A number the service computed: a leading "-" is a sign, not a formula.
        f"{score:.4f}" if isinstance(score, int | float) else "",
        *(_meta_cell((r.get("metadata") or {}).get(k)) for k in keys),
    ]


def write_responses(rows: Iterable[dict[str, Any]], fmt: str, out: TextIO) -> int:
    """Write the rows of ``thematiq responses`` as a table, CSV, JSON or JSONL; returns how many.

    JSONL and CSV stream page by page. CSV has one column per metadata key, named as the key unless a fixed
    column already has that name (then ``metadata.KEY``); keys first seen after the first page are kept in a
    trailing JSON ``metadata`` column so no value is lost.
    """
    n = 0
    if fmt == "jsonl":
        for r in rows:
            out.write(json.dumps(r, ensure_ascii=False) + "\n")
            n += 1
        return n
    if fmt == "json":
        items = list(rows)
        out.write(json.dumps(items, indent=2, ensure_ascii=False) + "\n")
        return len(items)
    if fmt == "csv":
        return _write_csv(rows, out)
    table_rows = []
    for r in rows:
        themes = r.get("themes") or []
        table_rows.append([str(r["id"]), themes[0]["label"] if themes else r.get("bucket") or "",
                           (r.get("sentiment") or {}).get("label", ""), r.get("text") or ""])
    out.write(table(["id", "theme", "sentiment", "text"], table_rows) + "\n")
    return len(table_rows)


class _CsvWriter:
    """``csv.writer``'s rows, and a field that holds a ";" quoted too, so a reader that also splits on ";" keeps it
    whole and no formula starts behind the ";" (review46): the service's ``pipelines/thematic/render.CsvWriter``."""

    def __init__(self, out: TextIO) -> None:
        self._out, self._csv = out, csv.writer(out, lineterminator="\r\n")

    def writerow(self, row: Sequence[Any]) -> None:
        if any(";" in v for v in row if isinstance(v, str)):
            self._out.write(",".join(_csv_field(v) for v in row) + "\r\n")
        else:
            self._csv.writerow(row)  # the common row, at the C writer's speed


def _csv_field(value: Any) -> str:
    s = "" if value is None else str(value)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',";\r\n') else s


def _write_csv(rows: Iterable[dict[str, Any]], out: TextIO) -> int:
    w = _CsvWriter(out)
    it = iter(rows)
    first: list[dict[str, Any]] = []
    for r in it:
        first.append(r)
        if len(first) >= 500:
            break
    keys: list[str] = []
    for r in first:
        for k in r.get("metadata") or {}:
            if k not in keys:
                keys.append(k)
    names = metadata_columns(keys, (*RESPONSE_CSV_COLUMNS, "metadata_other"))
    w.writerow([*RESPONSE_CSV_COLUMNS, *(_safe(c) for c in names), "metadata_other"])
    n = 0
    for r in [*first, *it]:
        extra = {k: v for k, v in (r.get("metadata") or {}).items() if k not in keys}
        w.writerow([*_csv_row(r, keys), _safe(json.dumps(extra, ensure_ascii=False)) if extra else ""])
        n += 1
    return n

def comparison_table(cmp: dict[str, Any]) -> str:
    """``result.comparison`` (``compare_to``) as a table: each theme's share then and now and the change in
    percentage points, * significant; a new theme is not tested. The Markdown report and the dashboard have
    this table; the CLI had no view of it."""
    rows = []
    for r in cmp.get("themes") or []:
        change = r.get("change")
        tested = isinstance(change, int | float)
        # A new theme has no share then; discover mode's gone theme has one but is not tested.
        has_then = r.get("status") != "new" and isinstance(r.get("share_then"), int | float)
        then = f"{r['share_then']:.1%}" if has_then else "-"
        now = f"{r['share_now']:.1%}" if isinstance(r.get("share_now"), int | float) else "-"
        exact = " (exact)" if r.get("test") == "fisher" else ""  # Fisher's exact test: too few answers for z
        rows.append([then, now, f"{change * 100:+.1f} pts" + ("*" if r.get("significant") else " ") + exact
                     if tested else "-",
                     str(r.get("status", "")), str(r.get("label", r.get("theme_id")))])
    procedure = (cmp.get("testing") or {}).get("procedure")
    note = (f"Change since job {cmp.get('job_id')}: {cmp.get('n_then')} usable responses then, {cmp.get('n_now')} now; "
            "share of each wave, change in percentage points, * significant (two-proportion test, "
            + ("weighted " if procedure == "weighted-bh" else "") + "Benjamini-Hochberg q < 0.05); "
            "a new theme is not tested; (exact): Fisher's exact test, an expected count is below 5.")
    warning = [f"Warning: {cmp['warning']}"] if cmp.get("warning") else []
    far = [line] if (line := far_note(cmp)) else []
    return visible("\n".join([note, *warning, *far, "", table(["Then", "Now", "Change", "Status", "Theme"], rows,
                                                         right=(0, 1, 2)), *_families(cmp)]))


#: The service's ``pipelines.thematic.render.FAMILIES_NOTE`` (a unit test holds them equal).
FAMILIES_NOTE = (
    "Families of near earlier themes, each tested as one share (its themes' answers pooled; Benjamini–Hochberg over "
    "the families): a change spread over near themes, or a theme a codebook edit split, is tested here")


def _families(cmp: dict[str, Any]) -> list[str]:
    """``comparison.groups``: each family of near earlier themes tested as one share, which no view showed."""
    groups = [g for g in cmp.get("groups") or [] if isinstance(g, dict)]
    if not groups:
        return []
    labels = {str(r.get("theme_id")): str(r.get("label")) for r in cmp.get("themes") or []}
    then = cmp.get("then") or {}
    rows = []
    for g in groups:
        names = " + ".join(labels.get(t) or str((then.get(t) or {}).get("label") or t) for t in g.get("theme_ids") or [])
        change = g.get("change")
        rows.append([f"{g['share_then']:.1%}", f"{g['share_now']:.1%}",
                     (f"{change * 100:+.1f} pts" + ("*" if g.get("significant") else " ")
                      + (" (exact)" if g.get("test") == "fisher" else "")) if isinstance(change, int | float) else "-",
                     names])
    return ["", FAMILIES_NOTE + "; * significant, (exact): Fisher's exact test.", "",
            table(["Then", "Now", "Change", "Family"], rows, right=(0, 1, 2))]


def multi_label_note(result: dict[str, Any]) -> str | None:
    """As the service's report says it (pipelines.thematic.render.multi_label_note): with multi_label the shares
    add up to more than 100 %."""
    n = sum(1 for a in result.get("assignments") or [] if len(a.get("themes") or []) > 1)
    if not n:
        return None
    return (f"{n} response{'s have' if n != 1 else ' has'} more than one theme: each counts in every one of its "
            "themes (and in each broad theme one of them is in), so the shares add up to more than 100%.")


def copies_note(n: int) -> str:
    """What the usable count holds besides distinct answers: the CLI's copy of
    ``pipelines.thematic.render.copies_note`` (a unit test holds them equal)."""
    return (f"The usable responses include {n} cop{'y' if n == 1 else 'ies'} of an earlier answer, each counted with "
            "that answer's themes and its own metadata, never clustered or quoted (count_duplicates=false leaves "
            "them out).")


def levels_line(levels: dict[str, Any]) -> str:
    """The two levels of a result in a line. Both levels the themes (up to 12 themes, no sub-themes; every compared
    job) is one level: it read "Levels: 13 broad themes (themes), 13 fine (themes)", as if 13 groups held 13 more
    themes (review46u)."""
    if levels.get("broad") == "themes" and levels.get("fine") == "themes":
        return f"Levels: one, {levels.get('fine_count')} themes (no broad themes above them, no sub-themes below)"
    return (f"Levels: {levels.get('broad_count')} broad themes ({levels.get('broad')}), "
            f"{levels.get('fine_count')} fine ({levels.get('fine')})")


def far_note(cmp: dict[str, Any]) -> str | None:
    """The inherit comparison's far answers in a sentence: the CLI's copy of ``pipelines.thematic.render.far_note``
    (the CLI must not import the service's pipelines; a unit test holds them equal)."""
    far, n_now = cmp.get("far"), cmp.get("n_now")
    if not isinstance(far, int) or not isinstance(n_now, int) or n_now <= 0:
        return None
    new = sum(1 for r in cmp.get("themes") or [] if r.get("status") == "new")
    fate = (f"those that cluster together form the {new} new theme{'s' if new > 1 else ''}" if new
            else "too few cluster together to form a new theme")
    return (f"{far} of the {n_now} answers now ({far / n_now:.1%}) are far from every earlier theme (an unchanged "
            f"wave has 2-5 % at about 2,100 answers a wave, 3-13 % at 200-350); {fate}, the rest are coded to their nearest earlier theme or to no theme.")


def impact_starred(row: dict[str, Any]) -> bool:
    """Whether a theme's impact gets a *: the CLI's copy of ``pipelines.thematic.impact.starred`` (the CLI must not
    import the service's pipelines; tests/unit/cli/test_impact_star_matches_the_service.py holds them equal). A
    small_n row (fewer than impact.min_n responses) never does: its interval is too narrow to trust; nor does one
    ``explained_by`` other themes (one theme per response: its interval excludes 0 only against them)."""
    lo, hi = row.get("ci_low"), row.get("ci_high")
    return (not row.get("small_n") and not row.get("explained_by") and isinstance(lo, int | float)
            and isinstance(hi, int | float) and (lo > 0 or hi < 0))


def impact_table(imp: dict[str, Any]) -> str:
    """``result.impact`` as a table: a row per theme in the result's rank (most negative impact first)."""
    nps = imp.get("scale") == "nps"
    what = "NPS" if nps else "mean"

    def num(x: Any, sign: bool = True) -> str:
        if not isinstance(x, int | float):
            return "-"
        return (f"{x:+.1f}" if nps else f"{x:+.2f}") if sign else (f"{x:.1f}" if nps else f"{x:.2f}")

    rows = []
    k = len(imp.get("themes") or [])
    label_of = {str(t.get("theme_id")): str(t.get("label", t.get("theme_id"))) for t in imp.get("themes") or []}
    for t in imp.get("themes") or []:
        lo, hi = t.get("ci_low"), t.get("ci_high")
        sure = impact_starred(t)
        n = str(t.get("n", 0)) + (" (small n)" if t.get("small_n") else "")
        against = [label_of.get(str(x), str(x)) for x in t.get("explained_by") or []]
        label = str(t.get("label", t.get("theme_id"))) + (f" (against {', '.join(against)} only)" if against else "")
        rows.append([num(t.get("impact")) + ("*" if sure else " "), f"{num(lo)} .. {num(hi)}", n,
                     num(t.get("score"), sign=False), label])
    # stats46: critical values from permutations of the scores ("permutation"); older results Welch's t.
    interval = ("Welch's, critical values from 999 permutations of the scores" if imp.get("interval") == "permutation"
                else "Welch's t")
    note = (f"Impact on {imp.get('key')} ({imp.get('scale')}): overall {what} {num(imp.get('overall'), sign=False)} "
            f"over {imp.get('n')} scored responses; impact = overall minus the {what} without the theme, "
            f"95% interval ({interval}), * the interval excludes 0 (per theme, not corrected for the {k} "
            f"theme{'' if k == 1 else 's'}: with no effect at all about 1 theme in 20 would still get a *); "
            f"(small n): fewer than {imp.get('min_n') or 10} scored responses, never a *.")
    if imp.get("note"):
        note = f"{imp['note']}\n{note}"
    return visible("\n".join([note, "", table(["Impact", "95% interval", "n", what, "Theme"], rows, right=(0, 1, 2, 3))]))
