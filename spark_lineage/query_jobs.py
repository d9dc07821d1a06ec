"""Which Spark jobs each query ran, from the jobs' starts and ends: filed under their query, and taken in the
order they started once the query is read (the job listener keeps a query's in the JVM until then,
:mod:`spark_lineage.jvm.sql_jobs`; Spark posts a SQL execution's job events before its end, on the same
listener queue, so they are all there)."""

from __future__ import annotations

import threading

from spark_lineage.plan import QueryJob, SqlJobEnd, SqlJobStart

_QUERIES_KEPT = 1_000
"""Queries whose jobs are kept until the query is reported; the oldest are forgotten beyond this many (queries
that are never reported: read-only actions, sessions without lineage)."""


class QueryJobLog:
    """The jobs of the queries not reported yet, by query id (the py4j edge files a query's own jobs here as it
    reads the query, :func:`~spark_lineage.jvm.listener.read_query_jobs`)."""

    def __init__(self, kept: int = _QUERIES_KEPT) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._jobs: dict[int, list[QueryJob]] = {}
        self._query_of: dict[int, int] = {}
        """The query of each job whose end has not been seen, by job id."""
        self._query_of_execution: dict[int, int] = {}
        """The query of each SQL execution a job of which was filed, by execution id (as bounded as ``_jobs``)."""

    def record(self, event: SqlJobStart | SqlJobEnd) -> None:
        with self._lock:
            self._record(event)

    def _record(self, event: SqlJobStart | SqlJobEnd) -> None:
        if isinstance(event, SqlJobStart):
            query_id = event.query_id
            if event.execution_id is not None:
                if query_id is None:
                    # Spark's listener thread reached the job after the execution ended (it lags behind on a busy
                    # driver): an earlier job of the same execution, reached in time, says which query it was.
                    query_id = self._query_of_execution.get(event.execution_id)
                else:
                    self._query_of_execution[event.execution_id] = query_id
            if query_id is None:
                return  # nobody to file it under
            self._jobs.setdefault(query_id, []).append(QueryJob(event.details, event.time_ms))
            self._query_of[event.details.job_id] = query_id
            while len(self._jobs) > self._kept:
                forgotten = self._jobs.pop(next(iter(self._jobs)))
                for job in forgotten:
                    self._query_of.pop(job.details.job_id, None)
            while len(self._query_of_execution) > self._kept:
                del self._query_of_execution[next(iter(self._query_of_execution))]
            return
        query_id = self._query_of.pop(event.job_id, None)
        jobs = [] if query_id is None else self._jobs.get(query_id, [])
        for index, job in enumerate(jobs):
            if job.details.job_id == event.job_id:
                jobs[index] = QueryJob(job.details, job.start_ms, event.time_ms, event.succeeded)

    def take(self, query_id: int | None) -> tuple[QueryJob, ...]:
        """The jobs of a query being reported, in the order they started; forgotten here."""
        if query_id is None:
            return ()
        with self._lock:
            jobs = self._jobs.pop(query_id, [])
            for job in jobs:
                self._query_of.pop(job.details.job_id, None)
        return tuple(sorted(jobs, key=lambda job: (job.start_ms, job.details.job_id)))
