"""docker/: the Compose file, the Jupyter image (which the Connect server runs too) and the example notebook,
checked without a Docker engine.

Two tools from ``scripts/docker-tools`` (the directory it prints is ``$SPARK_LINEAGE_DOCKER_TOOLS``, by default
``.cache/docker-tools/bin``): ``compose-config`` loads the Compose file with compose-go, as ``docker compose
config`` does, and ``hadolint`` lints the Dockerfile. Without them those tests skip, unless
``SPARK_LINEAGE_REQUIRE_DOCKER_TOOLS=1`` (as ``scripts/test`` sets), where they fail. A real ``docker compose``
on PATH is used too when there is one. The rest reads the files with PyYAML and json and checks that the pieces
point at each other: the URLs at the API service and its port, the build at the sources it installs.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
COMPOSE_FILE = DOCKER / "compose.yml"
DOCKERFILE = DOCKER / "jupyter" / "Dockerfile"
DOCKERIGNORE = DOCKER / "jupyter" / "Dockerfile.dockerignore"
SPARK_DEFAULTS = DOCKER / "jupyter" / "spark-defaults.conf"
NOTEBOOK = DOCKER / "notebooks" / "lineage_example.ipynb"

TOOLS_ENV = "SPARK_LINEAGE_DOCKER_TOOLS"
REQUIRE_ENV = "SPARK_LINEAGE_REQUIRE_DOCKER_TOOLS"

DB, API, WEB, JUPYTER, CONNECT = "marquez-db", "marquez-api", "marquez-web", "jupyter", "connect-server"
MARQUEZ_IMAGES = ("marquezproject/marquez", "marquezproject/marquez-web")
JUPYTER_IMAGE = "quay.io/jupyter/pyspark-notebook"
NOTEBOOK_WORKDIR = "/home/jovyan/work"
# The database, user and password the Marquez image's built-in configuration (marquez.dev.yml) connects with.
MARQUEZ_BUILTIN_DB = {"POSTGRES_DB": "marquez", "POSTGRES_USER": "marquez", "POSTGRES_PASSWORD": "marquez"}


# -- helpers ------------------------------------------------------------------------------------------------


def tool(name: str) -> Path:
    directory = Path(os.environ.get(TOOLS_ENV) or REPO / ".cache" / "docker-tools" / "bin")
    path = directory / name
    if path.is_file() and os.access(path, os.X_OK):
        return path
    reason = f"{name} is not in {directory}: run scripts/docker-tools and set {TOOLS_ENV} to the directory it prints"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1)")
    pytest.skip(reason)


def compose_env() -> dict[str, str]:
    """The environment without anything that changes how Compose reads the file or what it interpolates."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "JUPYTER_TOKEN"))}


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=compose_env(), capture_output=True, text=True, timeout=60, check=False)


def load_with_compose_config(compose_file: Path) -> dict[str, Any]:
    result = run([str(tool("compose-config")), str(compose_file)], cwd=compose_file.parent)
    assert result.returncode == 0, f"compose-config rejects {compose_file}:\n{result.stderr}"
    project: dict[str, Any] = json.loads(result.stdout)
    return project


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return data


def service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    assert name in compose["services"], f"no service {name!r} in {COMPOSE_FILE}"
    found: dict[str, Any] = compose["services"][name]
    return found


def environment(svc: dict[str, Any]) -> dict[str, str]:
    """A service's environment, from the mapping or the list form, as strings."""
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def published_ports(svc: dict[str, Any]) -> dict[int, int]:
    """container port -> host port, from the short syntax ``[ip:]host:container``."""
    ports = {}
    for entry in svc.get("ports", []):
        *_, host, container = str(entry).split(":")
        ports[int(container)] = int(host)
    return ports


def depends_on_healthy(svc: dict[str, Any]) -> set[str]:
    depends = svc.get("depends_on") or {}
    return {name for name, spec in depends.items() if (spec or {}).get("condition") == "service_healthy"}


def spark_defaults() -> dict[str, str]:
    conf = {}
    for raw in SPARK_DEFAULTS.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, value = re.split(r"\s+|=", line, maxsplit=1)
            conf[key] = value.strip()
    return conf


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    instructions = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            keyword, _, arguments = line.partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of every COPY without --from."""
    found = []
    for keyword, arguments in dockerfile_instructions():
        if keyword == "COPY":
            words = shlex.split(arguments)
            if any(word.startswith("--from") for word in words):
                continue
            paths = [word for word in words if not word.startswith("--")]
            found.append((paths[:-1], paths[-1]))
    return found


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parents decides."""
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        globs = [glob, glob.replace("**/", "")] if glob.startswith("**/") else [glob]
        if any(fnmatch.fnmatchcase(candidate, g) for candidate in candidates for g in globs):
            excluded = not negated
    return excluded


def notebook() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(NOTEBOOK.read_text())
    return data


def cell_source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else str(source)


# -- the validators ------------------------------------------------------------------------------------------


def test_compose_config_loads_the_compose_file_and_resolves_its_paths() -> None:
    project = load_with_compose_config(COMPOSE_FILE)
    services = project["services"]
    assert set(services) == {DB, API, WEB, JUPYTER, CONNECT}
    for name in (JUPYTER, CONNECT):
        build = services[name]["build"]
        assert Path(build["context"]) == REPO, f"the {name} image is built from the repository root"
        assert (Path(build["context"]) / build["dockerfile"]) == DOCKERFILE
    mounts = {volume["target"]: volume for volume in services[JUPYTER]["volumes"]}
    assert mounts[NOTEBOOK_WORKDIR]["type"] == "bind"
    assert Path(mounts[NOTEBOOK_WORKDIR]["source"]) == NOTEBOOK.parent
    assert services[API]["depends_on"][DB]["condition"] == "service_healthy"
    assert services[JUPYTER]["environment"]["OPENLINEAGE_URL"] == f"http://{API}:5000"
    assert services[CONNECT]["depends_on"][API]["condition"] == "service_healthy"
    assert services[CONNECT]["ports"][0]["target"] == 15002


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["services"][API].update(depnds_on=c["services"][API].pop("depends_on")), "depnds_on"),
        (lambda c: c["services"][JUPYTER]["depends_on"].update(marquez={"condition": "service_healthy"}), "marquez"),
        (lambda c: c["services"][DB]["healthcheck"].update(interval="5 seconds"), "interval"),
    ],
    ids=["unknown-key", "undefined-dependency", "bad-duration"],
)
def test_compose_config_rejects_a_broken_compose_file(change: Any, message: str, tmp_path: Path) -> None:
    """The validator really validates: each of these breaks the file, and it says where."""
    broken = yaml.safe_load(COMPOSE_FILE.read_text())
    change(broken)
    (tmp_path / "docker").mkdir()
    broken_file = tmp_path / "docker" / "compose.yml"
    broken_file.write_text(yaml.safe_dump(broken))
    result = run([str(tool("compose-config")), str(broken_file)], cwd=broken_file.parent)
    assert result.returncode != 0, f"compose-config accepted a broken file:\n{result.stdout[:2000]}"
    assert message in result.stderr


def test_docker_compose_config_accepts_the_compose_file() -> None:
    """The real thing, where a Docker CLI with the compose plugin is installed (never required)."""
    docker = shutil.which("docker")
    if docker is None or run([docker, "compose", "version"], cwd=DOCKER).returncode != 0:
        pytest.skip("no `docker compose` on this machine")
    result = run([docker, "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"], cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    result = run([str(tool("hadolint")), "--no-color", str(DOCKERFILE)], cwd=REPO)
    assert result.returncode == 0, f"hadolint {DOCKERFILE}:\n{result.stdout}{result.stderr}"


# -- the Compose file ----------------------------------------------------------------------------------------


def test_the_services_and_their_pinned_images(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {DB, API, WEB, JUPYTER, CONNECT}
    api_image, web_image = (service(compose, name)["image"] for name in (API, WEB))
    assert [image.split(":")[0] for image in (api_image, web_image)] == list(MARQUEZ_IMAGES)
    api_tag, web_tag = api_image.split(":")[1], web_image.split(":")[1]
    assert api_tag == web_tag, "the Marquez API and web UI come from the same release"
    assert re.fullmatch(r"\d+\.\d+\.\d+", api_tag), f"Marquez pinned to a release, not {api_tag!r}"
    db_image = service(compose, DB)["image"]
    assert re.fullmatch(r"postgres:\d+(\.\d+)?", db_image), f"PostgreSQL pinned to a version, not {db_image!r}"
    assert "build" in service(compose, JUPYTER)


def test_the_api_uses_the_database_and_starts_after_it(compose: dict[str, Any]) -> None:
    db, api = service(compose, DB), service(compose, API)
    api_env, db_env = environment(api), environment(db)
    assert api_env["POSTGRES_HOST"] == DB
    assert api_env["POSTGRES_PORT"] == "5432"
    assert {key: db_env.get(key) for key in MARQUEZ_BUILTIN_DB} == MARQUEZ_BUILTIN_DB
    assert DB in depends_on_healthy(api)
    assert "healthcheck" in db
    assert "healthcheck" in api
    assert api_env["MARQUEZ_ADMIN_PORT"] in " ".join(api["healthcheck"]["test"]), "the API's health check asks it"
    assert api_env.get("SEARCH_ENABLED") == "false", "no OpenSearch service here"


def test_the_web_ui_points_at_the_api(compose: dict[str, Any]) -> None:
    web, api = service(compose, WEB), service(compose, API)
    web_env = environment(web)
    assert web_env["MARQUEZ_HOST"] == API
    assert web_env["MARQUEZ_PORT"] == environment(api)["MARQUEZ_PORT"]
    assert API in depends_on_healthy(web)
    assert "healthcheck" in web
    assert published_ports(web) == {int(web_env["WEB_PORT"]): 3000}


def test_jupyter_sends_lineage_to_the_api_service(compose: dict[str, Any]) -> None:
    jupyter, api = service(compose, JUPYTER), service(compose, API)
    api_port = int(environment(api)["MARQUEZ_PORT"])
    jupyter_env = environment(jupyter)
    for where, url in [
        ("OPENLINEAGE_URL in the Jupyter service's environment", jupyter_env["OPENLINEAGE_URL"]),
        ("spark.openlineage.transport.url in spark-defaults.conf", spark_defaults()["spark.openlineage.transport.url"]),
    ]:
        parts = urlsplit(url)
        assert (parts.scheme, parts.hostname, parts.port) == ("http", API, api_port), f"{where}: {url}"
    assert spark_defaults()["spark.openlineage.transport.type"] == "http"
    assert spark_defaults()["spark.openlineage.namespace"] == jupyter_env["OPENLINEAGE_NAMESPACE"]
    assert API in depends_on_healthy(jupyter)


def test_published_ports(compose: dict[str, Any]) -> None:
    assert published_ports(service(compose, JUPYTER)) == {8888: 8888}
    assert published_ports(service(compose, WEB)) == {3000: 3000}
    assert published_ports(service(compose, CONNECT)) == {15002: 15002}
    assert published_ports(service(compose, API)) == {int(environment(service(compose, API))["MARQUEZ_PORT"]): 5000}
    assert not published_ports(service(compose, DB))


def test_jupyter_is_built_from_the_repository_and_mounts_the_notebooks(compose: dict[str, Any]) -> None:
    jupyter = service(compose, JUPYTER)
    context = (COMPOSE_FILE.parent / jupyter["build"]["context"]).resolve()
    assert context == REPO
    assert (context / jupyter["build"]["dockerfile"]).resolve() == DOCKERFILE
    mounts = dict(str(volume).split(":", 1) for volume in jupyter["volumes"])
    sources = {target: (COMPOSE_FILE.parent / source).resolve() for source, target in mounts.items()}
    assert sources == {NOTEBOOK_WORKDIR: NOTEBOOK.parent}


# -- the Connect server -------------------------------------------------------------------------------------


def connect_server_options(compose: dict[str, Any]) -> Any:
    """The connect-server service's command, parsed by ``spark-lineage connect-server``'s own options."""
    import argparse

    from spark_lineage.connect.server import add_arguments, server_options

    program, subcommand, *arguments = service(compose, CONNECT)["command"]
    assert (program, subcommand) == ("spark-lineage", "connect-server"), "the service runs the command"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args, extra = parser.parse_known_args(arguments)
    return server_options(args, extra, {})


def test_the_connect_server_sends_lineage_to_the_api_service(compose: dict[str, Any]) -> None:
    connect, api = service(compose, CONNECT), service(compose, API)
    options = connect_server_options(compose)
    url = urlsplit(options.confs["spark.openlineage.transport.url"])
    assert options.confs["spark.openlineage.transport.type"] == "http"
    assert (url.scheme, url.hostname, url.port) == ("http", API, int(environment(api)["MARQUEZ_PORT"]))
    assert options.confs["spark.openlineage.namespace"] != spark_defaults()["spark.openlineage.namespace"], (
        "the server's lineage has a namespace of its own, apart from the notebooks'"
    )
    assert API in depends_on_healthy(connect)
    assert published_ports(connect) == {options.port: options.port}
    assert str(options.port) in " ".join(connect["healthcheck"]["test"]), "the health check asks the server's port"


def test_the_connect_server_gets_time_to_end_its_runs(compose: dict[str, Any]) -> None:
    """Docker kills a container 10 s after SIGTERM unless told otherwise: the server's stop may take longer."""
    from spark_lineage.config.settings import LineageConfig
    from spark_lineage.connect.server import STOP_GRACE_SECONDS

    grace = re.fullmatch(r"(\d+)s", service(compose, CONNECT)["stop_grace_period"])
    assert grace, "stop_grace_period in seconds (45s)"
    assert int(grace.group(1)) > LineageConfig().shutdown_timeout + STOP_GRACE_SECONDS


def test_the_connect_server_runs_the_jupyter_image_build(compose: dict[str, Any]) -> None:
    connect, jupyter = service(compose, CONNECT), service(compose, JUPYTER)
    assert connect["build"] == jupyter["build"], (
        "one Dockerfile: PySpark 4.1.1 (which ships Spark Connect) and the package"
    )
    assert connect["image"] != jupyter["image"]


# -- the Jupyter image ---------------------------------------------------------------------------------------


def test_the_base_image_has_a_pyspark_the_package_supports() -> None:
    base = next(arguments for keyword, arguments in dockerfile_instructions() if keyword == "FROM")
    image, _, tag = base.partition(":")
    assert image == JUPYTER_IMAGE
    match = re.fullmatch(r"spark-(\d+\.\d+\.\d+)", tag)
    assert match, f"pin the base image to a Spark release (spark-X.Y.Z), not {tag!r}"
    requirements = [Requirement(r) for r in importlib.metadata.requires("spark-lineage") or []]
    pyspark = next(r for r in requirements if r.name == "pyspark")
    assert Version(match.group(1)) in pyspark.specifier, f"Spark {match.group(1)} is outside {pyspark}"


def test_the_dockerfile_installs_the_package_from_its_sources() -> None:
    copied = {source.rstrip("/"): destination for sources, destination in copies() for source in sources}
    for source in ("pyproject.toml", "README.md", "spark_lineage", "iceberg_facets"):
        assert source in copied, f"the Dockerfile does not COPY {source}"
    package_dir = copied["pyproject.toml"].rstrip("/")
    assert copied["spark_lineage"].rstrip("/") == f"{package_dir}/spark_lineage"
    assert copied["iceberg_facets"].rstrip("/") == f"{package_dir}/iceberg_facets"
    runs = " ".join(arguments for keyword, arguments in dockerfile_instructions() if keyword == "RUN")
    install = re.search(r"pip install ([^&;]*)", runs)
    assert install, "the Dockerfile runs no pip install"
    targets = [word for word in shlex.split(install.group(1)) if not word.startswith("-")]
    assert targets == [package_dir], "pip installs the copied sources, without the [spark] extra"
    users = [arguments for keyword, arguments in dockerfile_instructions() if keyword == "USER"]
    assert users and users[-1] == "${NB_UID}", "the container runs as the notebook user"


def test_spark_defaults_go_where_pyspark_reads_them() -> None:
    copied = {source: destination for sources, destination in copies() for source in sources}
    assert copied["docker/jupyter/spark-defaults.conf"] == "/usr/local/spark/conf/spark-defaults.conf"
    assert not any(keyword == "ENV" and "SPARK_CONF_DIR" in args for keyword, args in dockerfile_instructions())


def test_the_build_context_lets_in_what_the_dockerfile_copies_and_little_else() -> None:
    for sources, _ in copies():
        for source in sources:
            matches = [path.relative_to(REPO).as_posix() for path in REPO.glob(source.rstrip("/"))]
            if not any(char in source for char in "*?["):
                assert matches, f"COPY {source}: no such file in the repository"
            for match in matches:
                assert not dockerignore_excludes(match), f"COPY {source}: {match} is left out of the context"
    for path in (".venvs/pyspark-3.5/bin/python", ".git/HEAD", ".cache/x", "tests/unit/test_docker_files.py"):
        assert dockerignore_excludes(path), f"{path} would be sent to the Docker daemon"


# -- the notebook --------------------------------------------------------------------------------------------


def test_the_notebook_is_nbformat_4_with_empty_outputs() -> None:
    nb = notebook()
    assert nb["nbformat"] == 4
    assert nb["nbformat_minor"] >= 4
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    ids = [cell.get("id") for cell in nb["cells"]]
    if nb["nbformat_minor"] >= 5:
        assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(i)) for i in ids), ids
        assert len(set(ids)) == len(ids)
    for cell in nb["cells"]:
        assert cell["cell_type"] in ("code", "markdown")
        assert isinstance(cell["metadata"], dict)
        if cell["cell_type"] == "code":
            assert cell["outputs"] == []
            assert cell["execution_count"] is None
            lines = cell_source(cell).split("\n")
            code = "\n".join("pass" if line.lstrip().startswith("%") else line for line in lines)
            compile(code, f"{NOTEBOOK.name}:{cell.get('id')}", "exec")


def test_the_notebook_loads_the_extension_first_and_writes_lineage_worth_seeing() -> None:
    cells = notebook()["cells"]
    code = [cell_source(cell).strip() for cell in cells if cell["cell_type"] == "code"]
    assert cells[0]["cell_type"] == "code"
    assert code[0] == "%load_ext spark_lineage"
    assert "%lineage" in code
    program = "\n".join(code)
    assert "SparkSession" in program
    assert ".csv(" in program
    assert ".parquet(" in program
    assert "groupBy" in program
    assert "transport" not in program, "the lineage target comes from configuration, not from the notebook"
    text = "\n".join(cell_source(cell) for cell in cells if cell["cell_type"] == "markdown")
    assert "http://localhost:3000" in text
    assert spark_defaults()["spark.openlineage.namespace"] in text
