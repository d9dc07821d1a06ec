"""The rule for lineage from configuration alone, and the start-up hook that applies it, without a JVM."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spark_lineage.config import JAVA_AGENT_LISTENER, auto_activation

TRANSPORT = {"spark.openlineage.transport.type": "http", "spark.openlineage.transport.url": "http://marquez:5000"}


@pytest.mark.parametrize(
    ("conf", "on", "reason"),
    [
        (TRANSPORT, True, "spark.openlineage.transport.type is set"),
        ({"spark.openlineage.enabled": "true"}, True, "spark.openlineage.enabled=true"),
        ({**TRANSPORT, "spark.openlineage.enabled": "false"}, False, "spark.openlineage.enabled=false"),
        ({"spark.openlineage.namespace": "prod"}, False, "neither spark.openlineage.enabled=true nor any"),
        ({**TRANSPORT, "spark.openlineage.disabled": "true"}, False, "lineage is disabled"),
        ({"spark.openlineage.enabled": "maybe"}, False, "spark.openlineage.enabled='maybe' is not a boolean"),
        (
            {**TRANSPORT, "spark.extraListeners": f"com.acme.Audit, {JAVA_AGENT_LISTENER}"},
            False,
            "spark.extraListeners loads openlineage-spark",
        ),
    ],
)
def test_auto_activation_rule(conf: dict[str, str], on: bool, reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENLINEAGE_DISABLED", raising=False)
    decision = auto_activation(conf)
    assert decision.on is on
    assert decision.reason.startswith(reason), decision.reason


def test_openlineage_disabled_env_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    assert auto_activation({"spark.openlineage.enabled": "true"}).on is False


HOOK_STATE = """
import json, sys
before = [type(f).__name__ for f in sys.meta_path]
loaded_before = sorted(m for m in sys.modules if m.startswith("spark_lineage"))
import pyspark.sql.session as session
patched = getattr(session.SparkSession.__init__, "_spark_lineage_patched", False)
after = [type(f).__name__ for f in sys.meta_path]
print(json.dumps({
    "watching_before": "SparkLineageStartupHook" in before,
    "watching_after": "SparkLineageStartupHook" in after,
    "loaded_before": loaded_before,
    "patched": patched,
    "loader_restored": type(session.__loader__).__name__ != "_PatchingLoader",
    "modules": sorted(m for m in sys.modules if m.startswith("spark_lineage")),
}))
"""


def hook_state(**env: str) -> dict[str, object]:
    """What the installed .pth did in a fresh interpreter of this environment that imports pyspark."""
    pytest.importorskip("pyspark")
    result = subprocess.run(
        [sys.executable, "-c", HOOK_STATE], capture_output=True, text=True, env={**os.environ, **env}, check=True
    )
    state: dict[str, object] = json.loads(result.stdout)
    return state


def test_start_up_hook_patches_spark_session_once_pyspark_is_imported() -> None:
    state = hook_state()
    assert state == {
        "watching_before": True,
        "watching_after": False,
        "loaded_before": [],
        "patched": True,
        "loader_restored": True,
        "modules": ["spark_lineage", "spark_lineage._autoload", "spark_lineage._version"],
    }


@pytest.mark.parametrize("env", [{"PYTHON_WORKER_FACTORY_SECRET": "secret"}, {"SPARK_LINEAGE_AUTOLOAD": "0"}])
def test_start_up_hook_stays_out_of_workers_and_when_opted_out(env: dict[str, str]) -> None:
    state = hook_state(**env)
    assert (state["watching_before"], state["patched"]) == (False, False)


def test_the_first_start_in_a_process_ends_with_one_full_collection_and_later_ones_with_none() -> None:
    """Setting up leaves thousands of survivors; the full collection they would trigger mid-job runs at set-up
    instead, once per process (a fresh interpreter: this one's tests may have started lineage already)."""
    script = (
        "import gc\n"
        "from spark_lineage import activation\n"
        "before = gc.get_stats()[2]['collections']\n"
        "activation._collect_setup_garbage()\n"
        "first = gc.get_stats()[2]['collections'] - before\n"
        "activation._collect_setup_garbage()\n"
        "print(first, gc.get_stats()[2]['collections'] - before - first)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["1", "0"]
