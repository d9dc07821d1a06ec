"""Compare what openlineage-spark and spark_lineage reported for the same scenario.

Events are reduced to what must agree for a mixed fleet to join into one graph: each run's job name, its
input and output datasets, and each output's ``columnLineage`` (fields, input fields and transformation
types, subtypes, masking and descriptions; not their order, which the reference does not keep stable); and
what a consumer of the run's events sees of its progress: its event types in time order (START, RUNNING per
Spark job, COMPLETE or FAIL), which events carry the ``spark_jobDetails`` run facet and with which fields,
and which inputs carry ``inputStatistics`` (its presence: sizes vary, and so does the event that carries it
when openlineage-spark reads a cached Dataset); and, where a suite turns it on, the ``spark_unknown`` run
facet's entries and their columns (not how each agent describes a node). Run ids, times and producers are
left out. Every difference that remains must be listed, with its reason, in ``allowed_differences.toml``;
docs/compared.md shows that list under Known differences.

    python -m tests.parity.compare java.json python.json      # print the differences
    python -m tests.parity.compare --page                     # docs/compared.md's Known differences table
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

ALLOWED = Path(__file__).with_name("allowed_differences.toml")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "compared.md"
TABLE_START = "<!-- known-differences:start -->"
TABLE_END = "<!-- known-differences:end -->"
JOB_TYPES = frozenset({"SQL_JOB", "RDD_JOB"})

Transformations = frozenset[tuple[str, str, bool, str]]
"""Each transformation as (type, subtype, masking, description)."""
Sources = frozenset[tuple[str, str, str, Transformations]]


@dataclass(frozen=True)
class RunSummary:
    job: str
    inputs: frozenset[tuple[str, str]]
    outputs: frozenset[tuple[str, str]]
    columns: tuple[tuple[tuple[str, str], tuple[tuple[str, Sources], ...]], ...]
    """Per output dataset: per field (``dataset`` for dataset-level lineage), its input columns."""
    facets: tuple[tuple[tuple[str, str, str], str], ...] = ()
    """The dataset facets compared (only those a suite names): per (namespace, name, facet), the facet as
    canonical JSON without ``_producer`` and ``_schemaURL``."""
    event_types: tuple[str, ...] = ()
    """The run's event types in the order of their times."""
    job_details: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Per event with a ``spark_jobDetails`` run facet: its type and the facet's fields (in time order)."""
    input_statistics: frozenset[tuple[str, str]] = frozenset()
    """The inputs with ``inputStatistics`` on any event of the run."""
    unknown: str | None = None
    """The run's ``spark_unknown`` facet (on its last event that has one) as canonical JSON: its entries'
    columns, not their descriptions (each agent serializes a plan node its own way)."""


@dataclass(frozen=True)
class Difference:
    scenario: str
    job: str
    aspect: str
    detail: str
    reference: str
    ours: str

    def __str__(self) -> str:
        return (
            f"{self.scenario} | {self.job} | {self.aspect} {self.detail}\n"
            f"    openlineage-spark: {self.reference}\n    spark_lineage:     {self.ours}"
        )


@dataclass(frozen=True)
class AllowedDifference:
    """One accepted difference: where it shows (globs), and why it is accepted."""

    aspect: str
    reason: str
    scenarios: tuple[str, ...] = ("*",)
    jobs: tuple[str, ...] = ("*",)
    """Globs on the job name (``job`` in the file, one or a list)."""
    detail: str = "*"
    spark: tuple[str, ...] = ("*",)
    """The PySpark lines (``major.minor`` globs) it shows on: every line tested by default."""
    summary: str = ""
    intermittent: bool = False
    """The reference shows it in some runs only (its result depends on how far behind its listener is): not
    required to show in every run."""
    descriptions: bool | None = None
    """It shows only with column-lineage descriptions on (true) or off (false): the reference's transformation
    types depend on them. Unset: either way."""

    def concerns(self, scenarios: Iterable[str]) -> bool:
        """Whether the entry is about any of these scenarios (those of one suite: the main one, Delta's)."""
        return any(fnmatch.fnmatchcase(name, pattern) for name in scenarios for pattern in self.scenarios)

    def shows_on(self, spark: str, described: bool = False) -> bool:
        """Whether it shows on this PySpark line, with descriptions on (``described``) or off."""
        return any(fnmatch.fnmatchcase(spark, line) for line in self.spark) and self.descriptions in (None, described)

    def matches(self, difference: Difference, spark: str, described: bool = False) -> bool:
        return (
            self.shows_on(spark, described)
            and fnmatch.fnmatchcase(difference.aspect, self.aspect)
            and any(fnmatch.fnmatchcase(difference.scenario, s) for s in self.scenarios)
            and any(fnmatch.fnmatchcase(difference.job, job) for job in self.jobs)
            and fnmatch.fnmatchcase(difference.detail, self.detail)
        )


def load_allowed(path: Path = ALLOWED) -> list[AllowedDifference]:
    entries = tomllib.loads(path.read_text())["difference"]
    return [
        AllowedDifference(
            aspect=entry["aspect"],
            reason=" ".join(entry["reason"].split()),
            scenarios=tuple(entry.get("scenarios", ["*"])),
            jobs=tuple(_as_list(entry.get("job", "*"))),
            detail=entry.get("detail", "*"),
            spark=tuple(entry.get("spark", ["*"])),
            summary=" ".join(entry.get("summary", "").split()),
            intermittent=bool(entry.get("intermittent", False)),
            descriptions=entry.get("descriptions"),
        )
        for entry in entries
    ]


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


# --- reducing events -------------------------------------------------------------------------------------


def summarize(events: list[dict[str, Any]], facets: tuple[str, ...] = ()) -> dict[str, list[RunSummary]]:
    """Runs by job name (in the order they started), with what each read, wrote, and its column lineage; and
    the dataset ``facets`` named."""
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        job_type = ((event.get("job", {}).get("facets") or {}).get("jobType") or {}).get("jobType")
        if job_type in JOB_TYPES:
            by_run[event["run"]["runId"]].append(event)
    runs: dict[str, list[RunSummary]] = defaultdict(list)
    for run_events in sorted(by_run.values(), key=lambda evs: min(e["eventTime"] for e in evs)):
        inputs = {(d["namespace"], d["name"]) for e in run_events for d in e.get("inputs") or []}
        outputs = {(d["namespace"], d["name"]) for e in run_events for d in e.get("outputs") or []}
        columns: dict[tuple[str, str], tuple[tuple[str, Sources], ...]] = {}
        for event in run_events:  # the last event that has it wins
            for dataset in event.get("outputs") or []:
                facet = (dataset.get("facets") or {}).get("columnLineage")
                if facet:
                    columns[(dataset["namespace"], dataset["name"])] = _columns(facet)
        name = run_events[0]["job"]["name"]
        runs[name].append(
            RunSummary(
                name,
                frozenset(inputs),
                frozenset(outputs),
                tuple(sorted(columns.items())),
                _facets(run_events, facets),
                *_progress(run_events),
                _unknown(run_events),
            )
        )
    return runs


def _progress(
    run_events: list[dict[str, Any]],
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], frozenset[tuple[str, str]]]:
    """A run's event types in time order, its ``spark_jobDetails`` facets' fields, and which inputs carry
    ``inputStatistics``."""
    ordered = sorted(run_events, key=lambda event: _epoch_ms(event["eventTime"]))
    details = tuple(
        (event["eventType"], tuple(sorted(k for k in facet if not k.startswith("_"))))
        for event in ordered
        if (facet := (event["run"].get("facets") or {}).get("spark_jobDetails"))
    )
    statistics = frozenset(
        (dataset["namespace"], dataset["name"])
        for event in ordered
        for dataset in event.get("inputs") or []
        if (dataset.get("inputFacets") or {}).get("inputStatistics")
    )
    return tuple(event["eventType"] for event in ordered), details, statistics


def _unknown(run_events: list[dict[str, Any]]) -> str | None:
    facets = [f for e in run_events if (f := (e["run"].get("facets") or {}).get("spark_unknown"))]
    if not facets:
        return None

    def columns(entry: dict[str, Any] | None) -> Any:
        if entry is None:
            return None
        return {
            side: sorted([a["name"], a.get("type"), a.get("metadata") or {}] for a in entry.get(side) or [])
            for side in ("inputAttributes", "outputAttributes")
        }

    facet = facets[-1]
    inputs = sorted((columns(entry) for entry in facet.get("inputs") or []), key=json.dumps)
    return json.dumps({"output": columns(facet.get("output")), "inputs": inputs}, sort_keys=True)


def _epoch_ms(text: str) -> float:
    """An event time (``…Z`` from the reference, ``…+00:00`` from us) as milliseconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def _facets(run_events: list[dict[str, Any]], names: tuple[str, ...]) -> tuple[tuple[tuple[str, str, str], str], ...]:
    found: dict[tuple[str, str, str], str] = {}
    for event in run_events:  # the last event that has it wins
        for dataset in [*(event.get("inputs") or []), *(event.get("outputs") or [])]:
            for facet_name in names:
                facet = (dataset.get("facets") or {}).get(facet_name)
                if facet:
                    kept = {k: v for k, v in facet.items() if k not in ("_producer", "_schemaURL")}
                    found[(dataset["namespace"], dataset["name"], facet_name)] = json.dumps(kept, sort_keys=True)
    return tuple(sorted(found.items()))


def _columns(facet: dict[str, Any]) -> tuple[tuple[str, Sources], ...]:
    fields = [(name, _sources(value.get("inputFields") or [])) for name, value in (facet.get("fields") or {}).items()]
    if facet.get("dataset"):
        fields.append(("dataset", _sources(facet["dataset"])))
    return tuple(sorted(fields))


def _sources(input_fields: Iterable[dict[str, Any]]) -> Sources:
    merged: dict[tuple[str, str, str], set[tuple[str, str, bool, str]]] = defaultdict(set)
    for item in input_fields:
        key = (item["namespace"], item["name"], item["field"])
        merged[key].update(
            (t["type"], t.get("subtype") or "", bool(t.get("masking")), t.get("description") or "")
            for t in item.get("transformations") or []
        )
    return frozenset((*key, frozenset(value)) for key, value in merged.items())


# --- comparing ---------------------------------------------------------------------------------------------


def differences(
    scenario: str,
    reference: dict[str, Any],
    ours: dict[str, Any],
    facets: tuple[str, ...] = (),
    applications: Mapping[str, str] | None = None,
) -> list[Difference]:
    """What differs between the two runs of ``scenario``; ``facets``: dataset facets compared as well (aspect
    ``facets``, detail ``<namespace> <name> <facet>``); ``applications``: the application part of our job
    names (what comes before the first dot) that the reference names another way, as the reference's (see
    :func:`_as_reference_applications`)."""
    found: list[Difference] = []
    if reference.get("error") or ours.get("error"):
        found.append(Difference(scenario, "*", "error", "", reference.get("error") or "-", ours.get("error") or "-"))
    reference_runs, our_runs = summarize(reference["events"], facets), summarize(ours["events"], facets)
    if applications:
        our_runs, renamed = _as_reference_applications(scenario, our_runs, applications)
        found.extend(renamed)
    for job in sorted(set(reference_runs) | set(our_runs)):
        theirs, mine = reference_runs.get(job, []), our_runs.get(job, [])
        if not mine or not theirs:
            found.append(Difference(scenario, job, "job", "only in one", _describe(theirs), _describe(mine)))
            continue
        if len(theirs) != len(mine):
            found.append(Difference(scenario, job, "runs", "count", str(len(theirs)), str(len(mine))))
        for their_run, my_run in _paired(theirs, mine):
            found.extend(_compare_runs(scenario, job, their_run, my_run))
    return found


def _as_reference_applications(
    scenario: str, runs: dict[str, list[RunSummary]], applications: Mapping[str, str]
) -> tuple[dict[str, list[RunSummary]], list[Difference]]:
    """Our runs with each job named ``<ours>.<rest>`` (``ours`` a key of ``applications``) named
    ``<theirs>.<rest>``, so that the rest of the name, the datasets and the column lineage are compared with
    the reference's; and a difference (aspect ``jobName``, detail ``application``) per job renamed."""
    renamed: dict[str, list[RunSummary]] = defaultdict(list)
    found = []
    for job, job_runs in runs.items():
        application, dot, rest = job.partition(".")
        theirs = applications.get(application)
        name = job if theirs is None else f"{theirs}{dot}{rest}"
        if theirs is not None:
            found.append(Difference(scenario, name, "jobName", "application", theirs, application))
        renamed[name].extend(replace(run, job=name) for run in job_runs)
    return renamed, found


def _paired(theirs: list[RunSummary], mine: list[RunSummary]) -> list[tuple[RunSummary, RunSummary]]:
    """The runs of one job compared with each other: in the order they started where both sides have as many;
    where one side has more (an allowed ``runs`` difference), each run of the side with fewer is compared with
    the other side's run it differs least from, so that which of two runs started first, which can change from
    one try to the next, decides nothing."""
    if len(theirs) == len(mine):
        return list(zip(theirs, mine))
    pairs: list[tuple[RunSummary, RunSummary]] = []
    if len(mine) < len(theirs):
        unpaired = list(theirs)
        for my_run in mine:
            their_run = min(unpaired, key=lambda candidate: len(_compare_runs("", "", candidate, my_run)))
            unpaired.remove(their_run)
            pairs.append((their_run, my_run))
        return pairs
    return [(their_run, my_run) for my_run, their_run in _paired(mine, theirs)]


def _describe(runs: list[RunSummary]) -> str:
    if not runs:
        return "no such job"
    return "; ".join(f"reads {sorted(r.inputs)} writes {sorted(r.outputs)}" for r in runs)


START_MISSING = "START missing"
ONLY_THE_END = "START and RUNNING missing"


def _sequence_detail(theirs: Sequence[str], mine: Sequence[str]) -> str:
    """``START missing`` when the reference's events are ours less the first START; ``START and RUNNING
    missing`` when it sent only our last (its listener behind: it sends no event of an execution already
    ended but the end's); else ``sequence``."""
    if list(mine[:1]) == ["START"] and list(theirs) == list(mine[1:]):
        return START_MISSING
    if len(mine) > 1 and list(theirs) == list(mine[-1:]) and set(mine[:-1]) <= {"START", "RUNNING"}:
        return ONLY_THE_END
    return "sequence"


def _compare_runs(scenario: str, job: str, theirs: RunSummary, mine: RunSummary) -> list[Difference]:
    found = []
    for aspect in ("inputs", "outputs"):
        their_sets, my_sets = getattr(theirs, aspect), getattr(mine, aspect)
        for dataset in sorted(their_sets ^ my_sets):
            found.append(
                Difference(
                    scenario,
                    job,
                    aspect,
                    f"{dataset[0]} {dataset[1]}",
                    "yes" if dataset in their_sets else "no",
                    "yes" if dataset in my_sets else "no",
                )
            )
    sequence = _sequence_detail(theirs.event_types, mine.event_types) if theirs.event_types != mine.event_types else ""
    if sequence:
        found.append(
            Difference(scenario, job, "eventTypes", sequence, " ".join(theirs.event_types), " ".join(mine.event_types))
        )
    # Where the reference sent no RUNNING event at all (the difference above), it has no jobDetails to compare.
    if theirs.job_details != mine.job_details and sequence != ONLY_THE_END:
        found.append(
            Difference(scenario, job, "runFacets", "spark_jobDetails", _render_details(theirs), _render_details(mine))
        )
    if theirs.unknown != mine.unknown:
        their_unknown, my_unknown = theirs.unknown or "absent", mine.unknown or "absent"
        found.append(Difference(scenario, job, "runFacets", "spark_unknown", their_unknown, my_unknown))
    statistics = {key: "present" for key in theirs.input_statistics}
    my_statistics = {key: "present" for key in mine.input_statistics}
    found.extend(_keyed(scenario, job, "inputStatistics", statistics, my_statistics))
    found.extend(_keyed(scenario, job, "facets", dict(theirs.facets), dict(mine.facets)))
    their_columns, my_columns = dict(theirs.columns), dict(mine.columns)
    for dataset in sorted(set(their_columns) | set(my_columns)):
        their_fields, my_fields = dict(their_columns.get(dataset, ())), dict(my_columns.get(dataset, ()))
        if dataset not in their_columns or dataset not in my_columns:
            found.append(
                Difference(
                    scenario,
                    job,
                    "columnLineage",
                    "facet",
                    "present" if dataset in their_columns else "absent",
                    "present" if dataset in my_columns else "absent",
                )
            )
            continue
        for name in sorted(set(their_fields) | set(my_fields)):
            their_sources, my_sources = their_fields.get(name, frozenset()), my_fields.get(name, frozenset())
            if their_sources != my_sources:
                found.append(
                    Difference(
                        scenario,
                        job,
                        "columnLineage",
                        name,
                        _render(their_sources - my_sources),
                        _render(my_sources - their_sources),
                    )
                )
    return found


def _keyed(
    scenario: str, job: str, aspect: str, theirs: dict[tuple[str, ...], str], mine: dict[tuple[str, ...], str]
) -> list[Difference]:
    """A difference per key whose values differ (``absent`` where one side has none)."""
    return [
        Difference(scenario, job, aspect, " ".join(key), theirs.get(key, "absent"), mine.get(key, "absent"))
        for key in sorted(set(theirs) | set(mine))
        if theirs.get(key) != mine.get(key)
    ]


def _render_details(run: RunSummary) -> str:
    return " ".join(f"{event_type}({','.join(fields)})" for event_type, fields in run.job_details) or "none"


def _render(sources: Sources) -> str:
    if not sources:
        return "-"
    parts = []
    for _namespace, name, field_name, transformations in sorted(sources):
        kinds = ",".join(
            sorted(f"{t}/{s}{'/masked' if m else ''}{f' {d!r}' if d else ''}" for t, s, m, d in transformations)
        )
        parts.append(f"{name.rsplit('/', 1)[-1]}.{field_name}[{kinds}]")
    return " ".join(parts)


@dataclass
class Verdict:
    unexplained: list[Difference] = field(default_factory=list)
    explained: list[tuple[Difference, AllowedDifference]] = field(default_factory=list)


def judge(found: list[Difference], allowed: list[AllowedDifference], spark: str, described: bool = False) -> Verdict:
    """Which differences an allowed one explains, for runs on ``spark`` with descriptions on or off."""
    verdict = Verdict()
    for difference in found:
        match = next((entry for entry in allowed if entry.matches(difference, spark, described)), None)
        if match is None:
            verdict.unexplained.append(difference)
        else:
            verdict.explained.append((difference, match))
    return verdict


# --- docs/compared.md ------------------------------------------------------------------------------------------------


def page_section(allowed: list[AllowedDifference]) -> str:
    lines = [
        TABLE_START,
        "| where | Spark | what differs | why |",
        "|---|---|---|---|",
    ]
    for entry in allowed:
        where = ", ".join(f"`{s}`" for s in entry.scenarios) if entry.scenarios != ("*",) else "any scenario"
        spark = ", ".join(entry.spark) if entry.spark != ("*",) else "any"
        if entry.descriptions is not None:
            spark += ", descriptions " + ("on" if entry.descriptions else "off")
        lines.append(f"| {where} | {spark} | {entry.summary or entry.aspect} | {entry.reason} |")
    lines.append(TABLE_END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference", nargs="?", type=Path)
    parser.add_argument("ours", nargs="?", type=Path)
    parser.add_argument("--spark", default="3.5")
    parser.add_argument("--facets", default="", help="dataset facets to compare too, comma-separated")
    parser.add_argument(
        "--application",
        action="append",
        default=[],
        metavar="OURS=THEIRS",
        help="the application part of our job names the reference names THEIRS (the Connect suite's clients)",
    )
    parser.add_argument("--page", action="store_true", help="print docs/compared.md's Known differences table")
    args = parser.parse_args()
    allowed = load_allowed()
    if args.page:
        print(page_section(allowed))
        return
    reference, ours = json.loads(args.reference.read_text()), json.loads(args.ours.read_text())
    status = 0
    for scenario in sorted(set(reference) | set(ours)):
        found = differences(
            scenario,
            reference.get(scenario, {"events": []}),
            ours.get(scenario, {"events": []}),
            tuple(filter(None, args.facets.split(","))),
            dict(item.split("=", 1) for item in args.application),
        )
        verdict = judge(found, allowed, args.spark)
        for difference in verdict.unexplained:
            status = 1
            print(difference)
        for difference, entry in verdict.explained:
            allowed_as = entry.summary or entry.aspect
            print(f"(allowed: {allowed_as}) {difference.scenario} {difference.aspect} {difference.detail}")
    sys.exit(status)


if __name__ == "__main__":
    main()
