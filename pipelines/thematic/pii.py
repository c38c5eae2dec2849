"""Redaction of personal data (emails, phone numbers, payment card numbers) before text leaves for an LLM.

Deliberately conservative patterns: a false positive costs a few words of
context in a prompt, a false negative leaks data to a third party.
"""

from __future__ import annotations

import re
from typing import Final

EMAIL_RE: Final = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
# 13–19 digits, optionally grouped by single spaces or dashes.
CARD_RE: Final = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
# International or national numbers: optional +, 8–15 digits with the usual separators.
PHONE_RE: Final = re.compile(r"(?<![\w+])(?:\+|00)?\d(?:[\s().-]{0,2}\d){7,14}(?!\w)")


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum every payment card number satisfies."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card(m: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", m.group(0))
    return "[CARD]" if 13 <= len(digits) <= 19 and luhn_ok(digits) else m.group(0)


def redact(text: str) -> tuple[str, dict[str, int]]:
    """Text with PII replaced by ``[EMAIL]``, ``[CARD]``, ``[PHONE]``, and counts per kind."""
    counts = {"email": 0, "card": 0, "phone": 0}

    def sub(pattern: re.Pattern[str], repl: str, kind: str, s: str) -> str:
        def f(m: re.Match[str]) -> str:
            r = _card(m) if kind == "card" else repl
            if r != m.group(0):
                counts[kind] += 1
            return r

        return pattern.sub(f, s)

    text = sub(EMAIL_RE, "[EMAIL]", "email", text)
    # Cards before phones: a card number also looks like a long phone number.
    text = sub(CARD_RE, "[CARD]", "card", text)
    text = sub(PHONE_RE, "[PHONE]", "phone", text)
    return text, counts
