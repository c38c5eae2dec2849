"""The typed client's codebook calls against a real dev host: read with ETag, edit under If-Match, and two
concurrent edits of one version, of which exactly one lands (the lifecycle's conditional write decides)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.thematic_data import feedback
from thematiq_client import ApiError, Client, Codebook, Status


def test_codebook_edit_and_a_concurrent_edit_race(client: Client) -> None:
    items, _ = feedback(per_theme=12, seed=6)
    job = client.wait(client.submit("thematic", items, {"llm": "off", "min_theme_size": 4}), timeout=240)
    assert job.status == Status.SUCCEEDED
    book = client.codebook(job)
    assert isinstance(book, Codebook) and book.etag and book.themes and book.edits == []
    ids = [t["id"] for t in book.themes]

    # Eight renames of the same version at once: one 200, seven 412, and the stored result has one edit.
    def rename(i: int) -> int:
        try:
            client.edit_themes(job, [{"op": "rename", "theme": ids[0], "label": f"Name {i}"}], book.etag)
            return 200
        except ApiError as err:
            return err.status

    with ThreadPoolExecutor(8) as pool:
        statuses = sorted(pool.map(rename, range(8)))
    assert statuses == [200] + [412] * 7, statuses
    after = client.codebook(job)
    assert len(after.edits) == 1 and after.etag != book.etag
    # The name stored is the one edit that landed, not a mix of several.
    assert next(t for t in after.themes if t["id"] == ids[0])["name"] == after.edits[0]["label"]

    # An edit on the current version lands; the codebook goes back as seed_themes unchanged.
    merged = client.edit_themes(job, [{"op": "merge", "themes": ids[:2], "label": "Merged"}], after.etag)
    assert ids[1] not in [t["id"] for t in merged.themes] and [e["op"] for e in merged.edits] == ["rename", "merge"]
    seeded = client.wait(client.submit("thematic", items, {"llm": "off", "seed_themes": merged.themes}), timeout=240)
    assert seeded.status == Status.SUCCEEDED
    assert "Merged" in [s["name"] for s in client.result(seeded)["seed_themes"]]
    with pytest.raises(ApiError) as err:
        client.edit_themes(job, [{"op": "delete", "theme": ids[0]}], book.etag)
    assert err.value.status == 412
