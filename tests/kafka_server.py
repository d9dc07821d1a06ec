"""A real Kafka broker for the tests: ``kafka.Kafka`` from Maven Central, in KRaft mode (broker and controller
in one JVM), listening on 127.0.0.1 on free ports, with its data in a directory of the test's; stopped
afterwards.

Its jars come from Maven Central (``kafka_server.pom.xml`` beside this file) into ``.cache/kafka/lib`` on first
use; ``scripts/test`` fetches them before the tests. The broker is this process's child and is killed if this
process dies (``setpriv --pdeathsig``), so none outlives a test run. Topics are created on first use, with one
partition and one replica.
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import child_process, tail

HERE = Path(__file__).parent
POM = HERE / "kafka_server.pom.xml"
LIB = HERE.parent / ".cache" / "kafka" / "lib"
KAFKA_VERSION = "4.4.0"
HEAP = "-Xmx512m"
START_TIMEOUT_SECONDS = 120.0


class KafkaUnavailableError(RuntimeError):
    """No Java, no Maven to fetch the broker's jars, or no confluent-kafka to talk to it; the message says which."""


@dataclass(frozen=True)
class Kafka:
    """A running broker: how to reach it, and where it logs."""

    port: int
    log: Path
    host: str = "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for clients: ``127.0.0.1:<port>``."""
        return f"{self.host}:{self.port}"


def check_available() -> None:
    """Raise :class:`KafkaUnavailableError` when a broker cannot be started or used here."""
    if shutil.which("java") is None:
        raise KafkaUnavailableError("Java is not installed (java not found on PATH): the Kafka broker is a JVM")
    if not _installed() and shutil.which("mvn") is None:
        raise KafkaUnavailableError("Maven is needed once to fetch the Kafka broker's jars (mvn not found on PATH)")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise KafkaUnavailableError("confluent-kafka is not installed: pip install -e '.[kafka]'") from None


def install() -> Path:
    """Resolve the broker's classpath with Maven, once."""
    if not _installed():
        LIB.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mvn", "-q", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={LIB}"],
            check=True, timeout=900,
        )  # fmt: skip
    return LIB


def _installed() -> bool:
    return (LIB / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file()


@contextmanager
def kafka_server(workdir: Path, port: int | None = None) -> Iterator[Kafka]:
    """Start a broker with its data and log under ``workdir`` (on ``port``, else a free one), yield it once it
    answers metadata requests, and stop it."""
    lib = install()
    workdir.mkdir(parents=True, exist_ok=True)
    server = Kafka(port or _free_port(), workdir / "kafka.log")
    properties = workdir / "server.properties"
    controller_port = _free_port()
    while controller_port == server.port:
        controller_port = _free_port()
    properties.write_text(_server_properties(server, controller_port, workdir / "data"))
    java = ["java", HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp", f"{lib}/*"]
    with server.log.open("wb") as log:
        formatted = subprocess.run(
            [*java, "kafka.tools.StorageTool", "format", "--standalone", "--cluster-id", _cluster_id(),
             "--config", str(properties)],
            check=False, stdout=log, stderr=subprocess.STDOUT, timeout=120,
        )  # fmt: skip
    if formatted.returncode != 0:
        raise RuntimeError(f"formatting the Kafka broker's storage failed:\n{tail(server.log)}")
    broker = [*java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "kafka.Kafka", str(properties)]
    with child_process(broker, server.log) as process:
        _wait_until_ready(server, process)
        yield server


def read_topic(server: Kafka, topic: str, timeout: float = 30.0) -> list[tuple[bytes | None, bytes]]:
    """Every message on ``topic`` now, as ``(key, value)``, in offset order (partition by partition)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": server.bootstrap, "group.id": f"tests-{uuid.uuid4()}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=timeout).topics[topic].partitions
        wanted = {}
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
            if high > low:
                wanted[partition] = high
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in wanted])
        messages: dict[int, list[tuple[int, bytes | None, bytes]]] = {partition: [] for partition in wanted}
        deadline = time.monotonic() + timeout
        while any(not got or got[-1][0] < wanted[p] - 1 for p, got in messages.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read only {sum(map(len, messages.values()))} messages of {topic} in {timeout} s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise RuntimeError(f"reading {topic}: {message.error()}")
            messages[message.partition()].append((message.offset(), message.key(), message.value()))
        return [(key, value) for partition in sorted(messages) for _, key, value in messages[partition]]
    finally:
        consumer.close()


def _server_properties(server: Kafka, controller_port: int, data: Path) -> str:
    settings: dict[str, Any] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.bootstrap.servers": f"{server.host}:{controller_port}",
        "listeners": f"PLAINTEXT://{server.host}:{server.port},CONTROLLER://{server.host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{server.host}:{server.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data),
        "auto.create.topics.enable": "true",
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        # Two CPUs at most: few threads.
        "num.network.threads": 1,
        "num.io.threads": 2,
        "background.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "log.cleaner.enable": "false",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _cluster_id() -> str:
    """A random Kafka cluster id: 16 bytes in URL-safe base64 without padding (never starting with ``-``)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def _wait_until_ready(server: Kafka, process: subprocess.Popen[bytes]) -> None:
    """Until a metadata request lists the broker: it then takes produce requests and creates topics."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    admin = None
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the Kafka broker exited at start-up:\n{tail(server.log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Kafka broker did not start in {START_TIMEOUT_SECONDS:.0f} s:\n{tail(server.log)}")
        if _port_answers(server):
            admin = admin or AdminClient({"bootstrap.servers": server.bootstrap, "log_level": 0})
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except KafkaException:
                pass
        time.sleep(0.2)


def _port_answers(server: Kafka) -> bool:
    try:
        with socket.create_connection((server.host, server.port), timeout=1):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":  # python -m tests.kafka_server: start one, time it, stop it
    import tempfile

    began = time.monotonic()
    with kafka_server(Path(tempfile.mkdtemp(prefix="kafka-"))) as running:
        print(f"Kafka {KAFKA_VERSION} on {running.bootstrap} in {time.monotonic() - began:.1f} s; log {running.log}")
    print(f"stopped after {time.monotonic() - began:.1f} s")
