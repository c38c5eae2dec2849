"""Read a file of responses into the API's ``input`` list: ``[{id, text, metadata?}, ...]``.

Supported formats, chosen by extension:

* ``.csv`` / ``.tsv`` - a header row; the text column is ``--column`` or the
  first header named text/response/answer/comment/feedback (or the only
  column); ids come from ``--id-column``, a column named ``id``, or the row
  number; every other column goes into ``metadata``.
* ``.jsonl`` / ``.ndjson`` - one JSON object per line with ``id`` and ``text``
  (or ``--column`` / ``--id-column``); other keys go into ``metadata``.
* ``.json`` - a JSON array of such objects.
* anything else - plain text, one response per non-blank line.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .client import CliError

#: Header names tried, in order, when --column is not given.
TEXT_COLUMNS = ("text", "response", "answer", "comment", "feedback")
ID_COLUMNS = ("id",)


class InputError(CliError):
    """The input file cannot be turned into responses."""

    exit_code = 2


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    return "text"


def load_responses(
    path: str | Path, column: str | None = None, id_column: str | None = None, fmt: str | None = None
) -> list[dict[str, Any]]:
    """Parse ``path`` (see the module docstring); raises :class:`InputError` with a readable reason."""
    p = Path(path)
    try:
        # utf-8-sig: spreadsheet exports often start with a byte-order mark.
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"error: no such file: {p}") from None
    except UnicodeDecodeError as err:
        raise InputError(f"error: {p} is not UTF-8 text (byte {err.start}); re-save it as UTF-8") from None
    except OSError as err:
        raise InputError(f"error: cannot read {p}: {err.strerror}") from None
    kind = fmt or detect_format(p)
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


def parse_csv(
    text: str, column: str | None = None, id_column: str | None = None, delimiter: str | None = None
) -> list[dict[str, Any]]:
    if delimiter is None:
        # Excel in many locales writes ';'; sniff among the usual separators only.
        try:
            delimiter = csv.Sniffer().sniff(text[:8192], delimiters=",;\t").delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        return []
    except csv.Error as err:
        raise InputError(f"error: malformed CSV header: {err}") from None
    header = [h.strip() for h in header]
    text_col = _pick(header, column, TEXT_COLUMNS, "text")
    if text_col is None:
        if len(header) == 1:
            text_col = header[0]
        else:
            raise InputError(
                "error: cannot tell which column holds the text; the columns are: "
                f"{', '.join(header)}\n  hint: choose one with --column NAME"
            )
    id_col = _pick(header, id_column, ID_COLUMNS, "id")
    ti = header.index(text_col)
    ii = header.index(id_col) if id_col is not None else None
    items: list[dict[str, Any]] = []
    try:
        for n, row in enumerate(reader, start=1):
            if not row:
                continue  # a blank line, not an empty answer (that would be ",,")
            cells = row + [""] * (len(header) - len(row))
            rid: str | int = cells[ii].strip() if ii is not None else n
            if rid == "":
                raise InputError(f"error: row {n} has an empty {id_col!r}")
            meta = {h: cells[j] for j, h in enumerate(header) if j not in (ti, ii) and h}
            item: dict[str, Any] = {"id": rid, "text": cells[ti]}
            if meta:
                item["metadata"] = meta
            items.append(item)
    except csv.Error as err:
        raise InputError(f"error: malformed CSV near line {reader.line_num}: {err}") from None
    return items


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


def parse_jsonl(text: str, column: str | None = None, id_column: str | None = None) -> list[dict[str, Any]]:
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"error: line {n} is not valid JSON: {err.msg} (column {err.colno})") from None
        items.append(_from_object(obj, f"line {n}", n, column, id_column))
    return items


def parse_json(text: str, column: str | None = None, id_column: str | None = None) -> list[dict[str, Any]]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"error: not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
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
            value = json.loads(params_json)
        except json.JSONDecodeError as err:
            raise InputError(f"error: --params-json is not valid JSON: {err.msg} (column {err.colno})") from None
        if not isinstance(value, dict):
            raise InputError("error: --params-json must be a JSON object, e.g. '{\"min_theme_size\": 5}'")
        params.update(value)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"error: --param expects KEY=VALUE, got {pair!r}")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            # Not JSON: a bare word such as auto or off is meant as a string.
            params[key] = raw
    return params
