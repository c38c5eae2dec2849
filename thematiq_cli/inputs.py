"""Read a file of responses into the API's ``input`` list: ``[{id, text, metadata?}, ...]``.

Supported formats, chosen by extension:

* ``.xlsx`` - an Excel workbook (openpyxl, read-only): the first worksheet or
  ``--sheet``; then as CSV.
* ``.csv`` / ``.tsv`` - UTF-8 (with or without a BOM), UTF-16 with a BOM (Excel's
  "Unicode text") or Windows-1252 (older Excel "CSV" on Windows), detected in
  that order (``--encoding`` overrides). A header row (title rows above it and
  blank rows are skipped); the text column is ``--column`` or the first header
  named text/response/answer/comment/feedback (or the only column); ids come
  from ``--id-column``, a column named ``id``, or the row number under the
  header; every other column goes into ``metadata``, a column whose every filled
  cell is a plain number ("7", "-2", "4.5"; not "007" or a 16-digit integer) as JSON numbers.
* ``.jsonl`` / ``.ndjson`` - one JSON object per line with ``id`` and ``text``
  (or ``--column`` / ``--id-column``); other keys go into ``metadata``.
* ``.json`` - a JSON array of such objects.
* anything else - plain text, one response per non-blank line.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .client import CliError

#: The most responses one job takes: the server's ``MAX_RESPONSES`` (pipelines/thematic/params.py; the CLI
#: does not import the pipeline, and tests/unit/cli holds the two equal). A workbook is refused once it has more
#: rows than this, rather than read whole only for the server to refuse it.
MAX_RESPONSES = 100_000
#: The most a workbook's parts may inflate to in total (their sizes as the ZIP directory declares them, which
#: Python's zipfile holds each part to while reading): a zip bomb is refused before anything is inflated.
#: 100,000 responses of a few hundred characters take a few tens of MiB of sheet and shared-strings XML.
MAX_XLSX_INFLATED_BYTES = 128 * 1024 * 1024
#: Rows a worksheet may span, blank ones included (read-only openpyxl yields every row up to the last one).
MAX_XLSX_ROWS = 4 * MAX_RESPONSES
#: Title and header rows allowed above the responses (``_header_index`` looks at the first 20 filled rows).
_HEADER_ROWS = 20

#: Header names tried, in order, when --column is not given.
TEXT_COLUMNS = ("text", "response", "answer", "comment", "feedback")
ID_COLUMNS = ("id",)


class InputError(CliError):
    """The input file cannot be turned into responses."""

    exit_code = 2


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        return "xlsx"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    return "text"


def load_responses(
    path: str | Path, column: str | None = None, id_column: str | None = None, fmt: str | None = None,
    *, sheet: str | None = None, encoding: str | None = None,
) -> list[dict[str, Any]]:
    """Parse ``path`` (see the module docstring); raises :class:`InputError` with a readable reason."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"error: no such file: {p}") from None
    except OSError as err:
        raise InputError(f"error: cannot read {p}: {err.strerror}") from None
    kind = fmt or detect_format(p)
    if kind == "xlsx":
        items = parse_xlsx(data, column, id_column, sheet=sheet, name=p.name)
        if not items:
            raise InputError(f"error: {p} contains no responses")
        return items
    if sheet is not None:
        raise InputError("error: --sheet is for .xlsx workbooks")
    text = decode_text(data, p.name, encoding)
    if kind == "csv":
        items = parse_csv(text, column, id_column, delimiter="\t" if p.suffix.lower() == ".tsv" else None)
    elif kind == "jsonl":
        items = parse_jsonl(text, column, id_column)
    elif kind == "json":
        items = parse_json(text, column, id_column)
    else:
        items = parse_text(text)
    if not items:
        raise InputError(f"error: {p} contains no responses")
    return items


def _pick(names: Iterable[str], wanted: str | None, candidates: tuple[str, ...], what: str) -> str | None:
    names = list(names)
    lower = {n.strip().lower(): n for n in names}
    if wanted is not None:
        if wanted in names:
            return wanted
        if wanted.strip().lower() in lower:
            return lower[wanted.strip().lower()]
        raise InputError(f"error: no {what} column {wanted!r}; the columns are: {', '.join(names)}")
    for c in candidates:
        if c in lower:
            return lower[c]
    return None


def decode_text(data: bytes, name: str = "the file", encoding: str | None = None) -> str:
    """Bytes to text: a BOM (UTF-8, UTF-16) wins, then UTF-8, then Windows-1252; binary files are refused."""
    if encoding:
        try:
            return data.decode(encoding)
        except LookupError:
            raise InputError(f"error: unknown encoding {encoding!r}") from None
        except UnicodeDecodeError as err:
            raise InputError(f"error: {name} is not {encoding} (byte {err.start})") from None
    if data.startswith(b"\xef\xbb\xbf"):
        candidates: tuple[str, ...] = ("utf-8-sig",)
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        candidates = ("utf-16",)
    else:
        candidates = ("utf-8", "cp1252")
    text = None
    for enc in candidates:
        try:
            text = data.decode(enc)
            break
        except UnicodeDecodeError as err:
            first_error = err
    if text is None or "\x00" in text:
        where = f" (byte {first_error.start})" if text is None and candidates[0] == "utf-8" else ""
        raise InputError(
            f"error: {name} is not text in UTF-8, UTF-16 or Windows-1252{where}; "
            "export it as CSV or .xlsx, or name the encoding with --encoding"
        )
    return text


def _column_letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


#: Rows of a table as ``(row number in the file, cells)``; cells are None where the file has nothing.
Rows = list[tuple[int, list[str | None]]]


def _filled(cells: list[str | None]) -> int:
    return sum(1 for c in cells if c is not None and c.strip() != "")


def _header_index(rows: Rows, column: str | None) -> int | None:
    """Which row is the header: title rows above it and blank rows are skipped."""
    candidates = [i for i, (_, cells) in enumerate(rows[:50]) if _filled(cells)]
    if not candidates:
        return None
    wanted = [header_name(column).lower()] if column else list(TEXT_COLUMNS)
    for i in candidates[:20]:
        names = {header_name(c).lower() for c in rows[i][1]}
        if any(w in names for w in wanted):
            return i
    widest = max(_filled(rows[i][1]) for i in candidates[:20])
    return next(i for i in candidates[:20] if _filled(rows[i][1]) == widest)


#: Line breaks and tabs in a header cell ("How likely\nare you to recommend us?", a wrapped question in a survey
#: export): the service refuses a metadata key with one (a key is a column heading), so they fold into one space.
_HEADER_BREAKS = re.compile(r"\s*[\t\n\v\f\r\x1c-\x1f\x85\u2028\u2029]+\s*")


def header_name(cell: str | None) -> str:
    """A header cell as the metadata key it becomes: trimmed, its line breaks and tabs one space each."""
    return _HEADER_BREAKS.sub(" ", cell or "").strip()


def _refuse_repeated_names(header: list[str], where: str, letters: bool) -> None:
    """A name twice in the header: each response's metadata is keyed by name, so one column would replace the other."""
    first: dict[str, int] = {}
    for j, name in enumerate(header):
        if not name:
            continue
        if name in first:
            a, b = ((_column_letter(i) if letters else str(i + 1)) for i in (first[name], j))
            raise InputError(f"error: {where}: the header has {name!r} twice (columns {a} and {b}); rename one")
        first[name] = j


def table_items(
    rows: Rows, column: str | None = None, id_column: str | None = None, *, where: str = "row",
    letters: bool = False,
) -> list[dict[str, Any]]:
    """A table (header, then one response per row) to items; errors name the row and the column."""
    h = _header_index(rows, column)
    if h is None:
        return []
    header_number, raw_header = rows[h]
    header = [header_name(c) for c in raw_header]
    named = [n for n in header if n]
    _refuse_repeated_names(header, f"{where} {header_number}", letters)
    text_col = _pick(named, header_name(column) if column else column, TEXT_COLUMNS, "text")
    if text_col is None:
        if len(named) == 1:
            text_col = named[0]
        else:
            raise InputError(
                "error: cannot tell which column holds the text; the columns are: "
                f"{', '.join(named)}\n  hint: choose one with --column NAME"
            )
    id_col = _pick(named, header_name(id_column) if id_column else id_column, ID_COLUMNS, "id")
    ti = header.index(text_col)
    ii = header.index(id_col) if id_col is not None else None

    def col(j: int) -> str:
        return f"column {_column_letter(j)} ({header[j]!r})" if letters else f"column {header[j]!r}"

    items: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for offset, (number, cells) in enumerate(rows[h + 1:], start=1):
        if not cells or all(c is None for c in cells):
            continue  # a blank row, not an empty answer (that would be an empty cell in a row with others)
        cells = cells + [None] * (len(header) - len(cells))
        # Without an id column the id is the row number under the header (blank rows count, so it points back).
        rid: str | int = (cells[ii] or "").strip() if ii is not None else offset
        if rid == "":
            raise InputError(f"error: {where} {number}, {col(ii or 0)}: the id is empty")
        if ii is not None:
            if str(rid) in seen:
                raise InputError(
                    f"error: {where} {number}, {col(ii)}: id {rid!r} was already used in {where} {seen[str(rid)]}"
                )
            seen[str(rid)] = number
        meta = {n: cells[j] or "" for j, n in enumerate(header) if j not in (ti, ii) and n}
        item: dict[str, Any] = {"id": rid, "text": cells[ti] or ""}
        if meta:
            item["metadata"] = meta
        items.append(item)
    _numbers_as_numbers(items)
    return items


#: A cell that is a plain decimal number ("7", "-2", "4.5"): what a spreadsheet shows for a number. A leading zero
#: ("007", "01234": a code, a postcode) or an integer part of more than 15 digits (an account number, which a JSON
#: number would round) is text, as are "1e3", "7,5" and "1,000". The dashboard has the same rule (app.js NUMBER).
_NUMBER = re.compile(r"\s*(-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]+)?)\s*")


def _number(cell: Any) -> int | float | None:
    m = _NUMBER.fullmatch(cell) if isinstance(cell, str) else None
    if m is None:
        return None
    x = float(m.group(1))
    return int(x) if x.is_integer() else x


def _numbers_as_numbers(items: list[dict[str, Any]]) -> None:
    """A metadata column whose every filled cell is a number is sent as JSON numbers, as the dashboard sends the same
    file (web/static/app.js): sent as strings, ``sentiment_from`` refused the column ("expected numbers") and a
    breakdown grouped an NPS column's "0".."10" as eleven categories where the dashboard's file had NPS groups.
    Empty cells stay "" (missing)."""
    columns: dict[str, bool] = {}
    for item in items:
        for key, value in (item.get("metadata") or {}).items():
            if value != "" and columns.get(key, True):
                columns[key] = _number(value) is not None
    numeric = {k for k, ok in columns.items() if ok}
    for item in items:
        meta = item.get("metadata") or {}
        for key in numeric & meta.keys():
            if meta[key] != "":
                meta[key] = _number(meta[key])


def parse_csv(
    text: str, column: str | None = None, id_column: str | None = None, delimiter: str | None = None
) -> list[dict[str, Any]]:
    if delimiter is None:
        # Excel in many locales writes ';'; sniff among the usual separators only.
        try:
            delimiter = csv.Sniffer().sniff(text[:8192], delimiters=",;\t").delimiter
        except csv.Error:
            delimiter = ","
    line = _unclosed_quote_line(text, delimiter)
    if line is not None:
        raise InputError(f"error: line {line}: a quoted cell opens here and is never closed; "
                         'close it with " (a quote inside a quoted cell is written "")')
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows: Rows = []
    try:
        for row in reader:
            rows.append((reader.line_num, list(row)))
    except csv.Error as err:
        raise InputError(f"error: malformed CSV near line {reader.line_num}: {err}") from None
    # Errors name the physical line (a quoted cell may span lines); ids are the row number under the header.
    return table_items(rows, column, id_column, where="line")


#: Line breaks as the csv reader counts lines (it reads the text split on \n, \r\n and \r).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _unclosed_quote_line(text: str, delimiter: str) -> int | None:
    """The line of a quote left open at the end of the file, or None.

    Python's csv reader (lenient, its default) reads from such a quote to the end as one cell: every later row
    in one response, without a word. Read as it reads: a quote opens a quoted cell only at a cell's start (after
    the delimiter or a line break), ``""`` inside is a quote, and what follows the closing quote is plain text up
    to the delimiter, so a quote there is a character. The possessive ``*+`` never gives back a ``""``, so a cell
    is closed only by a quote that is not one of a pair. Agrees with the strict reader's "unexpected end of data" on
    200,000 random texts of a b , " \n \r and space (the 93 % the strict reader reads without another error).
    """
    if '"' not in text:
        return None
    cell = re.compile(r'(?<![^' + re.escape(delimiter) + r'\r\n])"(?:[^"]|"")*+("|\Z)')
    for m in cell.finditer(text):
        if not m.group(1):
            return len(_LINE_BREAK.findall(text, 0, m.start())) + 1
    return None


def _cell_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


def parse_xlsx(
    data: bytes, column: str | None = None, id_column: str | None = None, *, sheet: str | None = None,
    name: str = "the workbook",
) -> list[dict[str, Any]]:
    """The responses of one worksheet (the first unless ``sheet`` names one), read with openpyxl in read-only mode."""
    try:
        import openpyxl
    except ImportError:
        raise InputError("error: reading .xlsx needs openpyxl: pip install openpyxl") from None
    import zipfile

    def not_a_workbook(err: Exception) -> InputError:
        return InputError(f"error: {name} is not an .xlsx workbook ({type(err).__name__}); "
                          "save it as Excel Workbook (.xlsx) or CSV")

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            inflated = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError) as err:
        raise not_a_workbook(err) from None
    if inflated > MAX_XLSX_INFLATED_BYTES:
        raise InputError(
            f"error: {name} inflates to {inflated / 2**20:,.0f} MiB, more than the "
            f"{MAX_XLSX_INFLATED_BYTES // 2**20} MiB a workbook may; export the responses as CSV or split the file"
        )
    try:
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as err:
        raise not_a_workbook(err) from None
    try:
        names = wb.sheetnames
        if sheet is None:
            ws = wb.worksheets[0]
        elif sheet in names:
            ws = wb[sheet]
        elif sheet.isdigit() and 1 <= int(sheet) <= len(names):
            ws = wb.worksheets[int(sheet) - 1]
        else:
            raise InputError(f"error: no worksheet {sheet!r} in {name}; the sheets are: {', '.join(names)}")
        # Without this, read-only openpyxl pads blank rows up to the <dimension> the file declares, which can
        # say a million rows whatever the sheet holds.
        ws.reset_dimensions()
        rows: Rows = []
        filled = 0
        try:
            for number, values in enumerate(ws.iter_rows(values_only=True), start=1):
                if number > MAX_XLSX_ROWS:
                    raise InputError(f"error: {name}: row {number:,} is past the {MAX_XLSX_ROWS:,} rows a sheet may "
                                     "span; delete the rows below the responses")
                cells = [_cell_text(v) for v in values]
                while cells and cells[-1] is None:
                    cells.pop()
                filled += bool(cells)
                if filled > MAX_RESPONSES + _HEADER_ROWS:
                    raise _too_many(name)
                rows.append((number, cells))
        except zipfile.BadZipFile as err:  # a part that does not inflate to the size its directory entry says
            raise not_a_workbook(err) from None
    finally:
        wb.close()
    items = table_items(rows, column, id_column, where="row", letters=True)
    if len(items) > MAX_RESPONSES:
        raise _too_many(name)
    return items


def _too_many(name: str) -> InputError:
    return InputError(f"error: {name} has more than {MAX_RESPONSES:,} responses, the most one job takes; "
                      "split it into several files")


def _from_object(obj: Any, where: str, n: int, column: str | None, id_column: str | None) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise InputError(f"error: {where}: expected a JSON object with id and text")
    text_key = _pick(obj.keys(), column, TEXT_COLUMNS, "text")
    if text_key is None:
        raise InputError(f"error: {where}: no text field (keys: {', '.join(obj)}); choose one with --column")
    id_key = _pick(obj.keys(), id_column, ID_COLUMNS, "id") if id_column else ("id" if "id" in obj else None)
    text = obj[text_key]
    if not isinstance(text, str):
        raise InputError(f"error: {where}: {text_key!r} must be a string")
    rid = obj[id_key] if id_key is not None else n
    meta: dict[str, Any] = {}
    if isinstance(obj.get("metadata"), dict):
        meta.update(obj["metadata"])
    meta.update({k: v for k, v in obj.items() if k not in (text_key, id_key, "metadata")})
    item: dict[str, Any] = {"id": rid, "text": text}
    if meta:
        item["metadata"] = meta
    return item


class _RepeatedKey(ValueError):
    pass


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) < len(pairs):
        names = [k for k, _ in pairs]
        raise _RepeatedKey(f"the key {next(k for k in names if names.count(k) > 1)!r} appears twice in one object")
    return value


def _loads(text: str) -> Any:
    """JSON as the service reads it: a key twice in one object is refused (json.loads kept the last, silently)."""
    return json.loads(text, object_pairs_hook=_one_value_per_key)


def parse_jsonl(text: str, column: str | None = None, id_column: str | None = None) -> list[dict[str, Any]]:
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = _loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"error: line {n} is not valid JSON: {err.msg} (column {err.colno})") from None
        except _RepeatedKey as err:
            raise InputError(f"error: line {n}: {err}") from None
        items.append(_from_object(obj, f"line {n}", n, column, id_column))
    return items


def parse_json(text: str, column: str | None = None, id_column: str | None = None) -> list[dict[str, Any]]:
    try:
        value = _loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"error: not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except _RepeatedKey as err:
        raise InputError(f"error: {err}") from None
    if isinstance(value, dict) and isinstance(value.get("responses"), list):
        value = value["responses"]
    if not isinstance(value, list):
        raise InputError("error: a .json input must be an array of {id, text} objects")
    return [_from_object(o, f"item {i}", i + 1, column, id_column) for i, o in enumerate(value)]


def parse_text(text: str) -> list[dict[str, Any]]:
    """One response per non-blank line; the id is the line number, so it points back into the file."""
    return [{"id": n, "text": line.strip()} for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def parse_params(pairs: list[str], params_json: str | None = None) -> dict[str, Any]:
    """``--params-json`` first, then each ``--param k=v`` on top; values are JSON when they parse."""
    params: dict[str, Any] = {}
    if params_json:
        try:
            value = _loads(params_json)
        except json.JSONDecodeError as err:
            raise InputError(f"error: --params-json is not valid JSON: {err.msg} (column {err.colno})") from None
        except _RepeatedKey as err:
            raise InputError(f"error: --params-json: {err}") from None
        if not isinstance(value, dict):
            raise InputError("error: --params-json must be a JSON object, e.g. '{\"min_theme_size\": 5}'")
        params.update(value)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"error: --param expects KEY=VALUE, got {pair!r}")
        try:
            params[key] = _loads(raw)
        except json.JSONDecodeError:
            # Not JSON: a bare word such as auto or off is meant as a string.
            params[key] = raw
        except _RepeatedKey as err:
            raise InputError(f"error: --param {key}: {err}") from None
    return params
