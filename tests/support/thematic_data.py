"""Small synthetic feedback data sets (written for these tests) with known themes."""

from __future__ import annotations

import random
from typing import Any

THEMES: dict[str, tuple[list[str], list[str]]] = {
    "delivery": (
        ["The delivery was {adj} late", "My parcel arrived {adj} late and the courier was rude",
         "Shipping took {n} days longer than promised", "The package never arrived, delivery is {adj} slow",
         "Courier left the parcel in the rain, shipping was late"],
        ["very", "really", "extremely", "two weeks", "badly"],
    ),
    "price": (
        ["The price is {adj} too high for what you get", "Too expensive, I found it {adj} cheaper elsewhere",
         "Subscription cost went up again, {adj} overpriced", "Prices are {adj} unfair compared to competitors",
         "I cannot afford the monthly fee, it is {adj} expensive"],
        ["way", "much", "simply", "clearly", "far"],
    ),
    "app": (
        ["The mobile app crashes {adj} when I log in", "App keeps freezing on my phone, {adj} buggy",
         "Login screen of the app is {adj} broken after the update", "The app is {adj} slow and crashes on Android",
         "Cannot open the app since the latest update, it crashes {adj}"],
        ["constantly", "every time", "always", "again", "repeatedly"],
    ),
    "staff": (
        ["The support staff were {adj} helpful and friendly", "Customer service agent was {adj} kind and solved my issue",
         "Great support team, {adj} patient on the phone", "The staff in the store were {adj} polite and helpful",
         "Support answered quickly and was {adj} friendly"],
        ["very", "really", "super", "incredibly", "so"],
    ),
}


def feedback(per_theme: int = 15, seed: int = 0) -> tuple[list[dict[str, Any]], list[str]]:
    rng = random.Random(seed)
    items, labels = [], []
    n = 0
    for theme, (templates, fills) in THEMES.items():
        for i in range(per_theme):
            t = templates[i % len(templates)].format(adj=rng.choice(fills), n=rng.randint(2, 9))
            items.append({"id": n, "text": t + rng.choice(["", ".", "!", " :(", " honestly."]) + f" (#{i})"})
            labels.append(theme)
            n += 1
    return items, labels
