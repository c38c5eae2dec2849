"""English stopwords for keyword extraction (the only supported language, see params.py)."""

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
""".split()
)
