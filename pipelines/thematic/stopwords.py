"""Stopwords for keyword extraction: the vendored English list and, per language, `stop-words` lists."""

from __future__ import annotations

from typing import Final

EN: Final = frozenset(
    """
a about above after again against all almost also although always am among an and another any anyone anything
are aren't around as at be because been before being below between both but by can can't cannot could couldn't
did didn't do does doesn't doing don't done down during each either else enough even ever every few for from
further get gets getting got had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's its itself just least
less let let's like likely made make makes many may me might more most mostly much must mustn't my myself
need needs neither never no nor not now of off often on once one only or other others otherwise ought our ours
ourselves out over own per perhaps quite rather really said same say says see seem seems several shall shan't she
she'd she'll she's should shouldn't since so some something still such than that that's the their theirs them
themselves then there there's these they they'd they'll they're they've thing things this those though through
thus to too took two under until up upon us use used using very via was wasn't way we we'd we'll we're we've
well were weren't what what's when when's where where's whether which while who who's whom whose why why's will
with within without won't would wouldn't yes yet you you'd you'll you're you've your yours yourself yourselves
also mr mrs ms new told year years yesterday week weeks time times first last three going go goes went want
lot lots bit im ive dont doesnt didnt cant wont isnt thats youre theyre
someone somebody everyone everybody everything nothing nobody anybody
""".split()
)


#: Languages with a stopword list besides English (PyPI ``stop-words``,
#: BSD-3-Clause, read from its data files). Japanese/Chinese lists hold words;
#: keyword tokens there are character bigrams, so :func:`stopwords_for` adds
#: each listed word's bigrams and the common particles below.
PACKAGE_LANGUAGES: Final = ("de", "fr", "es", "it", "pt", "nl", "pl", "ru", "ar", "tr", "zh", "ja", "ko")
_CJK_EXTRA: Final = {
    "zh": "的 了 是 在 我 有 和 就 不 人 都 一 一个 上 也 很 到 说 要 去 你 会 着 没有 看 好 自己 这 那 这个 那个 我们 你们 他们 什么 怎么 可以 因为 所以 但是 如果 还是 就是 非常 比较 一下 一些",
    "ja": "の に は を た が で て と し れ さ ある いる も する から な こと として い や れる など なっ ない この ため その あっ よう また もの という あり まで られ なる へ か だ これ によって により おり より による ず なり られる において ば なかっ なく しかし について せ だっ その後 できる それ う ので なお のみ でき き つ における および いう さらに でも ら たり その他 に関する たち ます ん なら です でし ました ません ちょっと とても",
}

_cache: dict[tuple[str, ...], frozenset[str]] = {}


def _package_list(language: str) -> set[str]:
    try:
        from stop_words import get_stop_words
    except ImportError:  # pragma: no cover - stop-words is a run-time requirement
        return set()
    try:
        return {w.strip().lower() for w in get_stop_words(language) if w.strip()}
    except Exception:  # noqa: BLE001 - an unknown language has no list: keywords still work
        return set()


def _bigrams(word: str) -> set[str]:
    return {word[i : i + 2] for i in range(len(word) - 1)} if len(word) > 2 else {word}


def stopwords_for(*languages: str) -> frozenset[str]:
    """The union of the stopword lists of ``languages`` (English is the vendored list above)."""
    key = tuple(sorted(set(languages)))
    got = _cache.get(key)
    if got is not None:
        return got
    words: set[str] = set()
    for lang in key:
        if lang == "en":
            words |= EN
            continue
        listed = _package_list(lang) if lang in PACKAGE_LANGUAGES else set()
        if lang in _CJK_EXTRA:
            listed |= set(_CJK_EXTRA[lang].split())
            listed |= {b for w in list(listed) for b in _bigrams(w)}
        words |= listed
    out = frozenset(words)
    _cache[key] = out
    return out


#: Words that never make a whole label alone (describe.py), in any job: evaluative words and greetings (how, not
#: what: the sentiment stage's business) and the frames of a request (please, help, tell, tried ...). No domain
#: word: until 2026-12-02 this list also held the words that spread over the true themes of Banking77 and of the
#: feedback sample (account, card, money, food, order, delivery ...), which named those two sets' generic words
#: for every job (CLINC150 has intents called "transfer", "order" and "food_last"). A job finds its own now:
#: describe.word_stats, the words common in >= 30 % of its themes, and no single word another theme says commonly
#: is a label alone.
GENERIC: Final = frozenset(
    """
good great nice bad love best excellent amazing awesome terrible thanks thank hi hello ok okay issue problem
question please help know tell think tried take
""".split()
)
#: The words of :data:`GENERIC` that frame what is said rather than say it: politeness, greetings and request
#: frames. From data: the words of GENERIC that spread over the true themes of the TUNE sets Banking77 and 20NG
#: (``bench/labels.py --generic``: used by >= 5 % of the responses of >= 15 % of the themes; banking: help know please
#: take tell think tried; 20ng: also thanks thank hi ok), with "hello" and "okay" beside "hi" and "ok". Not "take":
#: at a label's end it is the theme's own verb on the TUNE sets ("Transfer take", how long a transfer takes). A label
#: option that starts or ends with one ("Please send", "Thanks in advance", "Phone please") yields to the best phrase
#: of 2+ words that does not: describe._unframed_first.
FRAME: Final = frozenset("thanks thank hi hello ok okay please help know tell think tried".split())
#: Personal pronouns (not "it", which is mostly a dummy subject: "how long does it take"). A label option that holds
#: one narrates one writer's sentence ("Card you sent", "Cash i asked", "Steps do i take", "Thought i had lost")
#: rather than naming what the theme's responses share; it yields to the best phrase of 2+ words without one that is
#: not framed either: describe._impersonal_first. A closed class of English, not data; fitted on nothing.
PERSONAL: Final = frozenset("i you we they he she".split())
#: Nouns that end in -ly, which the label rule's adverb test (a word of 5+ letters ending in -ly names how, not what:
#: "repeatedly") would otherwise never let name a theme alone. Not from data: the common English nouns of that
#: shape (and two proper nouns a survey names).
LY_NOUNS: Final = frozenset(
    "family reply supply assembly anomaly monopoly italy july belly jelly rally bully lily butterfly dragonfly "
    "firefly holly folly homily melancholy ally".split())

