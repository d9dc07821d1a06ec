"""The py4j edge: the only package that talks to the JVM.

- :mod:`~spark_lineage.jvm.bridge`: one SparkSession's facts, the query listener, Spark's listener bus;
- :mod:`~spark_lineage.jvm.spark`: Spark-specific reads of a finished query (plans, executed plan, failure,
  catalog lookups);
- :mod:`~spark_lineage.jvm.capture`: the two JVM-side functions a finished query is read with, whatever its
  size;
- :mod:`~spark_lineage.jvm.catalyst_tree`: a whole plan, expressions included, in one call;
- :mod:`~spark_lineage.jvm.listener`: a Spark listener that passes on only the jobs that are no SQL
  execution, and what those jobs read and write; :mod:`~spark_lineage.jvm.rdd`: an RDD's lineage graph;
- :mod:`~spark_lineage.jvm.sql_jobs`: SQL executions' jobs, kept in the JVM until their query is read;
- :mod:`~spark_lineage.jvm.method_handles`: the JVM-side functions both of those are composed of;
- :mod:`~spark_lineage.jvm.probes`: the generic evaluators of the probes handlers declare (JVM-side probers,
  and the Python way for what they leave);
- :mod:`~spark_lineage.jvm.sessions`: the queries of every other session of the driver (Spark Connect's), and
  Spark Connect's session events, from the listener bus;
- :mod:`~spark_lineage.jvm.streaming`: the streaming query listener, and reads of its events;
- :mod:`~spark_lineage.jvm.iceberg`: Iceberg's metrics reporter;
- :mod:`~spark_lineage.jvm.values`: how values cross (joined strings, cached class lookups, answers sent at
  once).
- :mod:`~spark_lineage.jvm.watch`: notices the JVM's process ending (SIGTERM, SIGKILL, a crash).

Everything it returns is plain Python data (:mod:`spark_lineage.plan`); none of it knows what a plan node
means.
"""

from spark_lineage.errors import JvmError
from spark_lineage.jvm.bridge import JvmBridge, QueryListener
from spark_lineage.jvm.catalyst_tree import SHAPE, TreeDetail
from spark_lineage.jvm.iceberg import IcebergMetricsReporter, PendingReport
from spark_lineage.jvm.listener import JobSink, PendingJob, PendingSqlJob
from spark_lineage.jvm.sessions import PendingSessionEvent, SessionSink
from spark_lineage.jvm.spark import CaptureRules, PendingQuery
from spark_lineage.jvm.streaming import PendingStreamEvent, StreamEventKind, StreamListener, StreamStarted

__all__ = [
    "SHAPE",
    "CaptureRules",
    "IcebergMetricsReporter",
    "JobSink",
    "JvmBridge",
    "JvmError",
    "PendingJob",
    "PendingQuery",
    "PendingReport",
    "PendingSessionEvent",
    "PendingSqlJob",
    "PendingStreamEvent",
    "QueryListener",
    "SessionSink",
    "StreamEventKind",
    "StreamListener",
    "StreamStarted",
    "TreeDetail",
]
