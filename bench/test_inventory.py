"""Prove that every test of a base revision still exists after the suite moved into tiers (issue 26).

Usage (each list is ``pytest --collect-only -q`` output, one node id a line)::

    .venv/bin/python -m pytest --collect-only -q -p no:cacheprovider > /tmp/after.txt
    .venv/bin/python bench/test_inventory.py /tmp/before.txt /tmp/after.txt --base main [--table]

Each old node id is mapped to new ones: its file follows git's rename detection (``git diff -M --base``), a
scenario that took the ``backend`` fixture is found by (test name, its other parameters, backend) in the renamed
file, its Azurite twin (``tests/integration/…_on_azurite.py``) or a file the change added (a module split in
two); a test renamed after its behaviour is looked up under its new name (``RENAMED``). What may be missing is
only the deliberate de-duplication, and it is counted apart:

* ``sweep``: the ``fake-sweep`` run of a scenario that never calls the reaper (the sweep flag is read only there,
  so the run repeated the ``fake`` one);
* ``fake, moved to integration``: a scenario that needs a real child process now runs once, on Azurite, in
  tests/integration (its fake runs repeated the Azurite one with a process each).

Anything else unmatched is printed and the exit code is 1.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import PurePosixPath

BACKENDS = ("fake-sweep", "azurite", "fake")
_BACKEND = re.compile(r"(?:^|-)(fake-sweep|azurite|fake)(?=-|$)")


#: Tests renamed from the audit that found them (``test_2_…``, ``test_a_a_…``) to the behaviour they check; the
#: audit's letter or number moved into the docstring. Old name -> new name, in any file of the family.
RENAMED: dict[str, str] = {
    "test_2_last_delivery_with_a_stored_result_does_not_fail_the_job":
        "test_the_last_delivery_does_not_fail_a_job_whose_result_is_stored",
    "test_3_an_unconfirmed_claim_is_released_not_left_to_burn_the_attempt":
        "test_a_claim_whose_answer_is_lost_and_cannot_be_read_back_is_released",
    "test_4_released_resume_with_a_stored_result_finishes_from_the_blob":
        "test_a_released_resume_with_a_stored_result_finishes_from_the_blob_without_a_rerun",
    "test_5_chunks_behind_a_backlog_are_not_resent":
        "test_queued_chunks_behind_a_backlog_are_not_resent_as_lost",
    "test_6_a_job_whose_input_can_never_be_read_still_ends":
        "test_a_job_whose_input_can_never_be_read_still_ends",
    "test_8_deferred_jobs_are_not_reenqueued_as_lost":
        "test_jobs_deferred_by_admission_control_are_not_reenqueued_as_lost",
    "test_10_an_unreadable_chunk_row_does_not_stop_chunk_recovery":
        "test_an_unreadable_chunk_row_does_not_stop_chunk_recovery",
    "test_11_a_slow_result_upload_is_not_reaped_from_under_the_worker":
        "test_a_slow_result_upload_is_not_reaped_from_under_the_worker",
    "test_a_a_lost_outcome_write_is_finished_from_the_stored_result_without_a_rerun":
        "test_an_outcome_write_that_fails_is_finished_from_the_stored_result_without_a_rerun",
    "test_a_a_stranded_running_job_with_a_stored_result_is_finished_by_the_reaper":
        "test_a_stranded_running_job_with_a_stored_result_is_finished_by_the_reaper",
    "test_a_an_exception_after_the_claim_releases_it_for_the_next_delivery":
        "test_an_exception_after_the_claim_releases_it_for_the_next_delivery",
    "test_b_a_committed_insert_is_answered_accepted_and_its_message_sent":
        "test_a_committed_insert_whose_answer_is_lost_is_answered_accepted_and_its_message_sent",
    "test_b_a_replay_of_a_queued_job_resends_its_message":
        "test_a_replayed_submission_of_a_queued_job_resends_its_message",
    "test_b_a_committed_insert_whose_retries_cannot_connect_is_still_decided_by_reading":
        "test_a_committed_insert_whose_retries_cannot_connect_is_still_decided_by_reading",
    "test_c_a_send_that_fails_leaves_the_row_for_the_reaper":
        "test_a_send_that_fails_leaves_the_committed_row_for_the_reaper",
    "test_d_the_last_delivery_never_fails_a_job_it_did_not_claim":
        "test_the_last_delivery_never_fails_a_job_it_did_not_claim",
    "test_d_the_last_delivery_never_fails_a_job_another_worker_runs":
        "test_the_last_delivery_never_fails_a_job_another_worker_runs",
    "test_f_creating_chunks_again_keeps_finished_chunks":
        "test_creating_chunks_again_keeps_finished_chunks",
    "test_g_an_unreadable_row_is_skipped_and_every_other_job_is_reaped":
        "test_an_unreadable_job_row_is_skipped_and_every_other_job_is_reaped",
    "test_g_a_cleared_datetime_reads_back_as_none":
        "test_a_cleared_datetime_reads_back_as_none",
    "test_h_jobs_behind_a_backlog_are_not_reenqueued":
        "test_never_claimed_jobs_behind_a_backlog_are_not_reenqueued_as_lost",
    "test_1_fence_stops_the_attempt_before_its_heartbeat_is_stale":
        "test_the_fence_stops_the_attempt_before_its_last_written_heartbeat_is_stale",
    "test_1_fence_counts_from_the_claims_heartbeat_not_from_runner_start":
        "test_the_fence_counts_from_the_claims_heartbeat_not_from_the_runners_start",
    "test_e_an_attempt_that_cannot_renew_its_lease_stops_before_the_reaper_hands_it_on":
        "test_an_attempt_that_cannot_renew_its_lease_stops_before_the_reaper_hands_it_on",
    "test_429_honours_retry_after_seconds":
        "test_a_rate_limited_call_waits_the_retry_after_seconds_before_retrying",
    "test_429_honours_retry_after_ms":
        "test_retry_after_ms_wins_over_retry_after",
    "test_500_then_success":
        "test_server_errors_are_retried_until_the_call_succeeds",
    "test_500_forever_raises_llm_error":
        "test_server_errors_that_never_end_raise_a_retryable_error_and_charge_nothing",
}


def node_ids(path: str) -> list[str]:
    with open(path) as f:
        return [line.strip() for line in f if "::" in line and not line.startswith(("ERROR", "FAILED"))]


def split(node: str) -> tuple[str, str, str, str | None]:
    """(file, test name, other parameters, backend) of a node id."""
    file, _, rest = node.partition("::")
    name, _, params = rest.partition("[")
    params = params.removesuffix("]")
    m = _BACKEND.search(params)
    backend = m.group(1) if m else None
    others = (params[: m.start()] + params[m.end():]).strip("-") if m else params
    return file, name, others, backend


def renames(base: str) -> tuple[dict[str, str], set[str]]:
    out = subprocess.run(["git", "diff", "-M", "--name-status", f"{base}...HEAD", "--", "tests"],  # from the merge base
                         capture_output=True, text=True, check=True).stdout
    moved, added = {}, set()
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0].startswith("R"):
            moved[parts[1]] = parts[2]
        elif parts[0] == "A":
            added.add(parts[1])
    return moved, added


def twin_of(path: str) -> str:
    p = PurePosixPath(path)
    if p.parts[:2] != ("tests", "unit"):
        return ""
    return str(PurePosixPath("tests", "integration", *p.parts[2:-1], p.stem + "_on_azurite.py"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--base", default="main")
    ap.add_argument("--table", action="store_true", help="print old file -> new files with item counts")
    args = ap.parse_args(argv)
    old, new = node_ids(args.before), node_ids(args.after)
    moved, added = renames(args.base)
    index: dict[tuple[str, str, str, str | None], str] = {}
    for n in new:
        index[split(n)] = n
    by_name: dict[str, set[str]] = defaultdict(set)
    for n in new:
        by_name[split(n)[1]].add(split(n)[0])
    mapped: dict[str, list[str]] = {}
    dedup: Counter[str] = Counter()
    missing: list[str] = []
    files: dict[str, Counter[str]] = defaultdict(Counter)
    for o in old:
        file, name, others, backend = split(o)
        name = RENAMED.get(name, name)
        home = moved.get(file, file)
        others = moved.get(others, others)  # a test parametrised by file path (tests/unit/test_docstring_refs.py)
        family = [home, twin_of(home), *sorted(added)]
        hit = next((index[(f, name, others, backend)] for f in family if (f, name, others, backend) in index), None)
        if hit is not None:
            mapped[o] = [hit]
            files[file][split(hit)[0]] += 1
        elif backend == "fake-sweep" and any((f, name, others, "fake") in index for f in family):
            dedup["sweep"] += 1
        elif backend in ("fake", "fake-sweep") and any((f, name, others, "azurite") in index for f in added):
            dedup["fake, moved to integration"] += 1
        else:
            missing.append(o)
    print(f"before: {len(old)} items, after: {len(new)} items")
    print(f"mapped one to one: {len(mapped)}; de-duplicated: {dict(dedup)} ({sum(dedup.values())}); "
          f"missing: {len(missing)}")
    fresh = len(new) - len({v[0] for v in mapped.values()})
    print(f"new items not derived from an old one: {fresh}")
    tiers = Counter(PurePosixPath(split(n)[0]).parts[1] for n in new)
    print("per tier: " + ", ".join(f"{t} {c}" for t, c in sorted(tiers.items())))
    if args.table:
        for f in sorted(files):
            print(f"{f} -> " + ", ".join(f"{g} ({c})" for g, c in sorted(files[f].items())))
    for o in missing:
        print("MISSING", o, flush=False)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
