"""The formats the CLI offers for a result are the ones the service serves. Until 2026-12-07 the hint after a
succeeded job and ``thematiq status`` said ``--format json|md|csv`` for every pipeline: a thematic result's
``xlsx`` and ``codebook`` went unmentioned, and an ``echo`` job (which has only ``json``) was told to ask for two
formats the service refuses."""

from __future__ import annotations

import io

import pytest

from pipelines.echo import PIPELINE as ECHO
from pipelines.thematic import PIPELINE as THEMATIC
from thematiq_cli.main import Io, report_outcome
from thematiq_cli.render import RESULT_FORMATS, job_details


def _served(pipeline: object) -> set[str]:
    """What ``GET /api/jobs/{id}/result?format=`` takes for a pipeline (shared/api/service.py)."""
    return {"json", *pipeline.renderers, *pipeline.exports}  # type: ignore[attr-defined]


def _job(pipeline: str) -> dict[str, object]:
    job_id = "fe5dc4f" + "0" * 21
    return {"id": job_id, "pipeline": pipeline, "status": "succeeded", "attempts": 1, "max_attempts": 3,
            "created_at": "2026-12-07T08:00:00Z", "finished_at": "2026-12-07T08:00:09Z",
            "progress": {"stage": "done", "processed": 1, "total": 1, "message": ""},
            "links": {"result": f"/api/jobs/{job_id}/result"}}


def test_the_cli_choices_are_what_the_thematic_pipeline_serves() -> None:
    assert set(RESULT_FORMATS) == _served(THEMATIC)


@pytest.mark.parametrize(("pipeline", "served"), [("thematic", _served(THEMATIC)), ("echo", _served(ECHO))])
def test_the_hints_name_every_format_the_service_serves_and_no_other(pipeline: str, served: set[str]) -> None:
    err = io.StringIO()
    assert report_outcome(_job(pipeline), Io(out=io.StringIO(), err=err)) == 0
    details = job_details(_job(pipeline))
    for text in (err.getvalue(), details):
        offered = text.split("--format ", 1)[1].split()[0].rstrip(")").strip("[]")
        assert set(offered.split("|")) == served, text
