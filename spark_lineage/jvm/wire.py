"""The texts the JVM-side functions write and Python reads: every tag, marker and separator, declared once.

The functions composed of method handles (:mod:`spark_lineage.jvm.method_handles`) answer plain text, so a
query's plan, probes and jobs cross py4j as one string each, and Python reads them without a round trip. Both
sides use the names here: the builders write ``TreeTag.PLAN.value``, the decoders compare with it. A change
to a format is a change to this module, and ``tests/unit/test_wire.py`` encodes each format in pure Python
(``tests/wire_writer.py``) and reads it back, over generated cases too.

Four formats share the value tokens of :class:`TreeTag` (a string, a number, nothing):

- the plan as a tree (:class:`TreeTag`, written by :class:`~spark_lineage.jvm.catalyst_tree.WalkBuilder`, read
  by :func:`~spark_lineage.jvm.catalyst_tree.decode`);
- a query's header and body (:class:`CaptureTag`, :mod:`spark_lineage.jvm.capture`);
- what the probers write of each plan node (:class:`ProbeTag`, :mod:`spark_lineage.jvm.probes`);
- the texts of Spark jobs' starts and ends and of session events, and the markers beside them
  (:class:`Separator`, :class:`JobMarker`, :class:`SessionEventKind`: :mod:`spark_lineage.jvm.listener`,
  :mod:`spark_lineage.jvm.sql_jobs`, :mod:`spark_lineage.jvm.sessions`).

Collections that cross as one text are joined with :data:`ITEM_SEP` (and maps' entries with :data:`KV_SEP`).
"""

from __future__ import annotations

from enum import Enum, IntEnum

ITEM_SEP = "\x1e"
"""Joins collection items JVM-side (``mkString``): ASCII record separators never occur in paths or names."""
KV_SEP = " -> "
"""Between a key and its value in a Scala map joined with ``mkString`` (how Scala prints a map entry)."""

CLASS_PREFIXES = (
    ("org.apache.spark.sql.catalyst.expressions.", "~e."),
    ("org.apache.spark.sql.catalyst.plans.logical.", "~l."),
    ("org.apache.spark.sql.execution.datasources.", "~d."),
    ("org.apache.spark.sql.execution.", "~x."),
    ("org.apache.spark.sql.catalyst.", "~c."),
    ("org.apache.spark.sql.types.", "~t."),
    ("org.apache.spark.sql.", "~s."),
)
"""The packages a tree's text writes class names in short (a plan repeats them hundreds of times): the JVM
replaces each package with its short form, in this order, and the decoder expands them back."""


class TreeTag(str, Enum):
    """The tokens of a tree's text, one per value (see :mod:`spark_lineage.jvm.catalyst_tree`).

    A plan node: ``{cls;hash;@<id>:<n>:<name>...;`` fields ``|`` ``hash;``... ``}``: its class, identity hash,
    output columns (expression id and name), its constructor parameters, then the identity hashes of its
    children (which are among those parameters). An expression: ``(cls;`` [``#id;``] [``qs<n>:<sql>``] fields
    ``)``.
    """

    PLAN = "{"
    PLAN_CHILDREN = "|"
    """Ends a plan node's fields; its children's identity hashes follow."""
    PLAN_END = "}"
    OUTPUT = "@"
    """Starts a plan node's output columns, each ``<exprId>:<n>:<name>``; :attr:`END` ends them."""
    TYPED_OUTPUT = "&"
    """Instead of :attr:`OUTPUT`: each column ``<exprId>:<n>:<name><n>:<type name><n>:<metadata JSON>``."""
    EXPRESSION = "("
    EXPR_ID_OF = "#"
    """``#<id>;`` after an expression's class: a named expression's id."""
    SQL_OF = "q"
    """``qs<n>:<text>`` after an expression's class and id: its ``Expression.sql`` (only for the expressions a
    plan node holds itself, and only when column-lineage descriptions are asked for)."""
    EXPRESSION_END = ")"
    SKIPPED_EXPRESSION = "x"
    """An expression not read (only the plan's shape was asked for)."""
    LIST = "["
    LIST_END = "]"
    TUPLE = "<"
    TUPLE_END = ">"
    NONE = "N"
    """``null`` or ``None``."""
    STRING = "s"
    """``s<n>:<text>``: a string of ``n`` code points."""
    SCALAR = "v"
    """``v<text>;``: a number or a boolean."""
    EXPR_ID = "e"
    """``e<id>;``: an ``ExprId``."""
    ENUM = "E"
    """``E<name>;``: a Java enum constant."""
    OPAQUE = "o"
    """``o<cls>;``: a value of any other class, by its class name only."""
    ROWS = "z"
    """``z<cls>;<n>;``: a sequence of ``n`` values of another kind (rows of a local relation), not walked."""
    END = ";"
    """Ends a class name, an identity hash, a number, a name."""
    LENGTH_END = ":"
    """Ends a string's length (and an output column's id)."""


class CaptureTag(str, Enum):
    """The tokens of a query's header and body (:mod:`spark_lineage.jvm.capture`): one value per field."""

    STRING = TreeTag.STRING.value
    """``s<n>:<text>``: text of ``n`` code points."""
    NUMBER = TreeTag.SCALAR.value
    """``v<text>;``: a number or a boolean."""
    NONE = TreeTag.NONE.value
    FAILED = "F"
    """The part threw: Python reads it again, the Python way."""
    TOO_LONG = "L"
    """``L<n>;``: the plan's text is ``n`` characters, more than allowed (not sent)."""
    LIST = "["
    """``[`` values ``]``: a list (the SQL texts of the parsed plan's children)."""
    LIST_END = "]"


class ProbeTag(str, Enum):
    """The text the JVM-side probes write (:class:`~spark_lineage.jvm.probes.ProbeCompiler`), which
    :class:`~spark_lineage.jvm.probes.JvmProbes` reads: for each object probed, one token saying whether its
    class has probes, then one value per probe, in the order the class's handler declares them."""

    PROBES = "!"
    """The object's values follow, one per probe, then :attr:`END`."""
    END = ";"
    NO_PROBES = "-"
    """The object's class declares no probes."""
    UNKNOWN = "u"
    """No prober is registered for the object's class yet: Python probes it (and registers the class)."""
    NONE = TreeTag.NONE.value
    STRING = TreeTag.STRING.value
    """``s<n>:<text>``: text of ``n`` code points (a value's ``toString``, a collection joined)."""
    SCALAR = TreeTag.SCALAR.value
    """``v<text>;``: a number or a boolean."""
    NESTED = "c"
    """``c<class>;`` then what the nested object's class probes (:attr:`PROBES`, :attr:`NO_PROBES` or
    :attr:`UNKNOWN`): a ``node`` probe's value."""
    TABLE = "t"
    """A ``table`` probe's ``CatalogTable``, as :attr:`NESTED`: Python completes it from the catalog when it
    lacks the database or the location."""
    RESOLVE = "r"
    """A kind that needs Spark knowledge (catalog lookups, nested plans, RDD graphs): Python reads it."""
    FAILED = "F"
    """The read threw: Python reads the probe again, for the error the way it reports it."""
    SKIPPED = "k"
    """Not read: the probe's ``if_field`` is empty in the node."""


class Separator(str, Enum):
    """What joins the fields of the texts the listeners pass Python: a Spark job's start and end (the job
    listener's, :mod:`spark_lineage.jvm.listener`) and a session event's (:mod:`spark_lineage.jvm.sessions`)."""

    FIELD = "\x1f"
    """Separates the fields: a job start's (the job's id, time, its properties, and for a SQL execution's job
    its query's id and its execution's id), a job end's (the job's id, time and the class of its result), a
    session event's (its :class:`SessionEventKind`, then that kind's fields)."""
    UNSET = "\x1d"
    """Stands for a field that was not set: a job property, or the job tags of a query whose start was not
    heard."""


class JobStartField(IntEnum):
    """The position of each field in a job start's text (joined with :attr:`Separator.FIELD`); a job end's text
    has three (the job's id, time and the class of its result)."""

    JOB_ID = 0
    TIME = 1
    DESCRIPTION = 2
    """``spark.job.description``, and the three below, are the job's properties (:attr:`Separator.UNSET` when
    unset), in the order of :data:`JOB_PROPERTIES`."""
    GROUP = 3
    CALL_SITE = 4
    STREAMING_QUERY = 5
    """``sql.streaming.queryId``: set for the jobs a streaming query's thread runs (its micro-batches, and the
    queries of its ``foreachBatch`` function)."""
    QUERY_KEY = 6
    """A SQL execution's job only: the key its query's jobs are filed under (see :func:`micro_batch_key`)."""
    EXECUTION_ID = 7
    """A SQL execution's job only: its execution's id."""


JOB_PROPERTIES = ("spark.job.description", "spark.jobGroup.id", "callSite.short", "sql.streaming.queryId")
"""The job properties a job start's text carries, from :attr:`JobStartField.DESCRIPTION` on."""
JOB_END_FIELDS = 3
MICRO_BATCH_KEY_SEP = "/"


def micro_batch_key(run_id: str, batch_id: int) -> str:
    """The key the JVM files a micro-batch's jobs under: its streaming query run's id and its batch id. A
    query's jobs are filed under its ``QueryExecution.id``: a number, which no micro-batch key is."""
    return f"{run_id}{MICRO_BATCH_KEY_SEP}{batch_id}"


class SessionEventKind(str, Enum):
    """What a text the session listener passes is about: its first field."""

    QUERY = "query"
    STARTED = "started"
    CLOSED = "closed"
    CLIENT = "client"


class JobMarker(str, Enum):
    """What the job listener passes Python beside a job's text or event (a string crosses py4j as a value, with
    no round trip), and what the JVM keeps of a job that writes files."""

    END = "end"
    """Beside an RDD job's end (its text, or its event)."""
    WRITES = "writes"
    """Kept in the JVM, until its end, for an RDD job that writes files (its start was passed to Python)."""
    BATCH_END = "batch end"
    """Filed after a micro-batch's jobs when its SQL execution ended: all of them are there."""
