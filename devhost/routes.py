"""HTTP route templates as ASP.NET Core routing (used by the Functions host) reads them.

Supports literal segments (case-insensitive), ``{param}``, optional
``{param?}``, defaults ``{param=value}``, catch-all ``{*rest}`` and inline
constraints such as ``{id:guid}``, ``{n:int:min(1)}``, ``{s:alpha}``,
``{s:length(2,5)}`` and ``{s:regex(^a+$)}``. Unknown constraints are ignored
(with a warning) rather than rejecting every request. Routes are tried in
ASP.NET's precedence order: literal segments beat constrained parameters, which
beat plain parameters, optional ones and catch-alls.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote

log = logging.getLogger("devhost")

Check = Callable[[str], bool]


def _is_int(v: str, lo: int = -(2**31), hi: int = 2**31 - 1) -> bool:
    return re.fullmatch(r"-?\d+", v) is not None and lo <= int(v) <= hi


def _is_float(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return v.strip().lower() not in {"nan", "inf", "-inf", "infinity"}


def _is_guid(v: str) -> bool:
    try:
        uuid.UUID(v)
    except ValueError:
        return False
    return True


def _num(v: str) -> float:
    return float(v) if _is_float(v) else float("nan")


def _constraint(spec: str) -> Check | None:
    """A predicate for one constraint like ``int`` or ``range(1,5)``; None if unknown."""
    m = re.fullmatch(r"(\w+)(?:\((.*)\))?", spec, re.S)
    if not m:
        return None
    name, arg = m.group(1).lower(), m.group(2)
    args = [a.strip() for a in arg.split(",")] if arg is not None and name != "regex" else []
    simple: dict[str, Check] = {
        "int": _is_int,
        "long": lambda v: _is_int(v, -(2**63), 2**63 - 1),
        "float": _is_float,
        "double": _is_float,
        "decimal": _is_float,
        "guid": _is_guid,
        "bool": lambda v: v.lower() in {"true", "false"},
        "alpha": lambda v: re.fullmatch(r"[A-Za-z]+", v) is not None,
    }
    if name in simple:
        return simple[name]
    if name == "min" and args:
        return lambda v: _num(v) >= float(args[0])
    if name == "max" and args:
        return lambda v: _num(v) <= float(args[0])
    if name == "range" and len(args) == 2:
        return lambda v: float(args[0]) <= _num(v) <= float(args[1])
    if name == "minlength" and args:
        return lambda v: len(v) >= int(args[0])
    if name == "maxlength" and args:
        return lambda v: len(v) <= int(args[0])
    if name == "length" and len(args) == 1:
        return lambda v: len(v) == int(args[0])
    if name == "length" and len(args) == 2:
        return lambda v: int(args[0]) <= len(v) <= int(args[1])
    if name == "regex" and arg is not None:
        # ASP.NET regex constraints are case-insensitive and unanchored unless ^/$ are used.
        rx = re.compile(arg, re.I)
        return lambda v: rx.search(v) is not None
    return None


@dataclass
class Segment:
    literal: str | None = None
    name: str = ""
    optional: bool = False
    catch_all: bool = False
    default: str | None = None
    checks: list[Check] = field(default_factory=list)

    @property
    def precedence(self) -> int:
        if self.literal is not None:
            return 0
        if self.catch_all:
            return 4
        if self.optional or self.default is not None:
            return 3
        return 1 if self.checks else 2


def _split_params(body: str) -> list[str]:
    """Split ``name:c1:c2(a:b)`` on colons that are outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == ":" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _parse_segment(text: str) -> Segment:
    if not (text.startswith("{") and text.endswith("}")):
        return Segment(literal=text.lower())
    parts = _split_params(text[1:-1])
    name = parts[0]
    seg = Segment()
    if name.startswith("**") or name.startswith("*"):
        seg.catch_all = True
        name = name.lstrip("*")
    if name.endswith("?"):
        seg.optional = True
        name = name[:-1]
    for i, c in enumerate(parts[1:]):
        last = i == len(parts) - 2
        if last and c.endswith("?"):
            seg.optional, c = True, c[:-1]
        if last and "=" in c and "(" not in c.split("=")[0]:
            c, seg.default = c.split("=", 1)
        check = _constraint(c)
        if check is None:
            log.warning("route constraint %r is not supported by the dev host: ignored", c)
        else:
            seg.checks.append(check)
    if "=" in name:
        name, seg.default = name.split("=", 1)
    seg.name = name
    return seg


@dataclass
class Route:
    """A compiled route template; ``match`` gives route params or None."""

    template: str
    segments: list[Segment]

    @classmethod
    def parse(cls, template: str) -> Route:
        parts = [p for p in template.strip("/").split("/") if p]
        return cls(template=template, segments=[_parse_segment(p) for p in parts])

    @property
    def precedence(self) -> tuple[int, ...]:
        return tuple(s.precedence for s in self.segments)

    def match(self, path_parts: list[str]) -> dict[str, str] | None:
        params: dict[str, str] = {}
        for i, seg in enumerate(self.segments):
            if seg.catch_all:
                # A catch-all takes the rest of the path and, as in ASP.NET, may be empty.
                rest = "/".join(path_parts[i:])
                if rest:
                    params[seg.name] = unquote(rest)
                elif seg.default is not None:
                    params[seg.name] = seg.default
                return params
            if i >= len(path_parts):
                # Only optional/defaulted parameters may be missing at the end.
                if seg.literal is not None or not (seg.optional or seg.default is not None):
                    return None
                if seg.default is not None:
                    params[seg.name] = seg.default
                continue
            raw = path_parts[i]
            if seg.literal is not None:
                if unquote(raw).lower() != seg.literal:
                    return None
                continue
            value = unquote(raw)
            if not all(check(value) for check in seg.checks):
                return None
            params[seg.name] = value
        if len(path_parts) > len(self.segments):
            return None
        return params


def split_path(path: str) -> list[str]:
    return [p for p in path.split("/") if p]
