"""The parity harness's comparison (tests/parity/compare.py) on hand-written events: what it reports decides
whether a parity test can fail, so it is tested too."""

from __future__ import annotations

from typing import Any

from tests.parity.compare import differences, load_allowed


def _run(run_id: str, job: str, *steps: tuple[str, str]) -> list[dict[str, Any]]:
    """The events of one run: ``steps`` are (event type, time of day)."""
    return [
        {
            "eventType": event_type,
            "eventTime": f"2026-12-02T10:00:{at}Z",
            "run": {"runId": run_id, "facets": {}},
            "job": {"name": job, "facets": {"jobType": {"jobType": "SQL_JOB"}}},
            "inputs": [{"namespace": "kafka://k", "name": "in"}],
            "outputs": [{"namespace": "kafka://k", "name": "out"}],
        }
        for event_type, at in steps
    ]


def _found(reference: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [
        (d.aspect, d.detail, d.reference, d.ours)
        for d in differences("s", {"events": reference, "error": None}, {"events": ours, "error": None})
    ]


def test_one_run_against_two_is_compared_with_the_one_it_matches_whichever_started_first() -> None:
    outer = _run("a", "job", ("START", "01.000"), ("COMPLETE", "04.000"))
    nested = _run("b", "job", ("START", "02.000"), ("RUNNING", "02.500"), ("COMPLETE", "03.000"))
    nested_first = _run("b", "job", ("START", "00.500"), ("RUNNING", "02.500"), ("COMPLETE", "03.000"))
    ours = _run("c", "job", ("START", "01.000"), ("COMPLETE", "04.000"))

    assert _found(outer + nested, ours) == [("runs", "count", "2", "1")]
    assert _found(outer + nested_first, ours) == [("runs", "count", "2", "1")]
    # and the other way round: our extra run does not hide a difference in the one that matters
    assert _found(ours, outer + nested) == [("runs", "count", "1", "2")]


def test_runs_as_many_on_both_sides_are_compared_in_the_order_they_started() -> None:
    reference = _run("a", "job", ("START", "01.000"), ("COMPLETE", "02.000")) + _run(
        "b", "job", ("START", "03.000"), ("RUNNING", "03.500"), ("COMPLETE", "04.000")
    )
    ours = _run("c", "job", ("START", "01.000"), ("RUNNING", "01.500"), ("COMPLETE", "02.000")) + _run(
        "d", "job", ("START", "03.000"), ("COMPLETE", "04.000")
    )

    assert _found(reference, ours) == [
        ("eventTypes", "sequence", "START COMPLETE", "START RUNNING COMPLETE"),
        ("eventTypes", "sequence", "START RUNNING COMPLETE", "START COMPLETE"),
    ]


def test_a_job_under_another_application_is_compared_as_the_references_and_the_name_is_a_difference() -> None:
    reference = _run("a", "parity.write.out", ("START", "01.000"), ("COMPLETE", "02.000"))
    ours = _run("b", "ann_revenue.write.out", ("START", "01.000"), ("COMPLETE", "02.000"))
    ours[-1]["outputs"] = [{"namespace": "kafka://k", "name": "elsewhere"}]

    found = differences("s", {"events": reference}, {"events": ours}, applications={"ann_revenue": "parity"})

    assert [(d.job, d.aspect, d.detail, d.reference, d.ours) for d in found] == [
        ("parity.write.out", "jobName", "application", "parity", "ann_revenue"),
        ("parity.write.out", "outputs", "kafka://k elsewhere", "no", "yes"),
    ]
    # an application not named stays as it is: its jobs are no job of the reference's
    unnamed = differences("s", {"events": reference}, {"events": ours}, applications={"bob": "parity"})
    assert [(d.job, d.aspect) for d in unnamed] == [("ann_revenue.write.out", "job"), ("parity.write.out", "job")]


def test_a_run_the_reference_sent_without_its_start_is_named_so_and_no_other_sequence_is() -> None:
    ours = _run("a", "job", ("START", "01.000"), ("RUNNING", "01.500"), ("COMPLETE", "02.000"))
    alone = _run("b", "job", ("RUNNING", "01.500"), ("COMPLETE", "02.000"))
    other = _run("c", "job", ("START", "01.000"), ("COMPLETE", "02.000"))

    assert _found(alone, ours) == [("eventTypes", "START missing", "RUNNING COMPLETE", "START RUNNING COMPLETE")]
    assert _found(other, ours) == [("eventTypes", "sequence", "START COMPLETE", "START RUNNING COMPLETE")]
    # ours without a START is never excused as the reference's lag
    assert _found(ours, alone) == [("eventTypes", "sequence", "START RUNNING COMPLETE", "RUNNING COMPLETE")]


def test_a_run_the_reference_sent_as_its_complete_alone_is_named_so_without_a_job_details_difference() -> None:
    """Its listener behind, the reference sends neither the START nor the RUNNING events (with their
    ``spark_jobDetails``) of an execution that has ended: one difference says so, which the allowed list
    excuses as intermittent; the missing RUNNING events' facets are no second difference."""
    ours = _run("a", "job", ("START", "01.000"), ("RUNNING", "01.500"), ("RUNNING", "01.800"), ("COMPLETE", "02.000"))
    for event in ours[1:3]:
        event["run"]["facets"]["spark_jobDetails"] = {"jobId": 1}
    alone = _run("b", "job", ("COMPLETE", "02.000"))
    found = differences("s", {"events": alone, "error": None}, {"events": ours, "error": None})
    assert [(d.aspect, d.detail) for d in found] == [("eventTypes", "START and RUNNING missing")]
    (allowed,) = [e for e in load_allowed() if e.matches(found[0], "4.3")]
    assert allowed.intermittent
    # a FAIL alone for ours ending COMPLETE is no lag
    failed = _run("c", "job", ("FAIL", "02.000"))
    details = [d.detail for d in differences("s", {"events": failed, "error": None}, {"events": ours, "error": None})]
    assert details[:1] == ["sequence"]
