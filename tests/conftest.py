"""Shared fixtures: real SQLite files, a real PostgreSQL schema per test, a real Redis.

PostgreSQL and Redis come from testcontainers when a Docker engine answers, otherwise
from PROBE_TEST_DATABASE_URL / PROBE_TEST_REDIS_URL. When neither is reachable the
tests that need them fail with a message saying so; they are never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from hypothesis import settings
from sqlalchemy import create_engine, make_url, text

from probe_service.errors import SandboxUnavailable
from probe_service.fstree import remove_tree
from probe_service.plans.warm import close_default_snapshot_cache
from probe_service.sandbox import SandboxRuntime, locate_runtime
from probe_service.sandbox import helper as launcher_helper
from probe_service.sandbox.helper import close_default_launchers
from probe_service.sandbox.slots import close_default_slots
from probe_service.store import DB_FILENAME, STATE_DIRNAME, Store, open_store
from probe_service.store.safety import prepare_state_dir

from .stubsandbox import StubSandbox

# Hypothesis profiles: CI must give the same verdict on every run, so with ``CI`` set the
# examples come from a fixed seed and no example database; ``make explore`` runs the
# randomized profile (more examples, fresh randomness) to look for new failures, and a
# failure found there is pinned as an ``@example`` or regression test.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None, max_examples=200)
settings.register_profile("dev", deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


def _docker_answers() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run([docker, "info"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.fixture(scope="session")
def postgres_base_url() -> Iterator[str]:
    """A reachable PostgreSQL URL: a testcontainer, else PROBE_TEST_DATABASE_URL."""
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16", driver="psycopg") as container:
            yield container.get_connection_url()
        return
    url = os.environ.get("PROBE_TEST_DATABASE_URL")
    if not url:
        pytest.fail(
            "PostgreSQL is needed: no Docker engine answers and PROBE_TEST_DATABASE_URL is "
            "unset (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)"
        )
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any failure means unreachable; the message says which
        pytest.fail(f"PostgreSQL at PROBE_TEST_DATABASE_URL={url} is unreachable: {exc}")
    finally:
        engine.dispose()
    yield url


@contextmanager
def fresh_schema(postgres_base_url: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped on exit."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    # pre_ping: a test may terminate backends on purpose; teardown must still work.
    admin = create_engine(postgres_base_url, pool_pre_ping=True)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield _schema_url(postgres_base_url, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def pg_url(postgres_base_url: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped after the test."""
    with fresh_schema(postgres_base_url) as url:
        yield url


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A fresh directory right below the temporary directory, removed after the test.

    For a launch whose runtime TMPDIR the test makes itself: the runtime puts its bridge
    sockets there (``claude-socks-<16 hex>.sock``), a socket's path holds at most 107 bytes,
    and below an xdist worker's ``tmp_path``
    (``/tmp/pytest-of-root/pytest-N/popen-gwK/<test name>/rt-tmp/``) there is too little
    left: the bridge never starts and the canary reports ``sandbox_failed``. Searchable by
    the probe uids, as ``make_searchable`` leaves a ``tmp_path``.
    """
    path = Path(tempfile.mkdtemp(prefix="bp-t-"))
    make_searchable(path)
    try:
        yield path
    finally:
        remove_tree(path)


@contextmanager
def fresh_redis_namespace(redis_url: str) -> Iterator[str]:
    """A fresh key namespace; its keys are deleted on exit."""
    import redis

    namespace = f"test-{uuid.uuid4().hex[:12]}"
    try:
        yield namespace
    finally:
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(f"{namespace}*"))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A reachable Redis URL: a testcontainer, else PROBE_TEST_REDIS_URL."""
    import redis

    if _docker_answers():
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7") as container:
            host = container.get_container_host_ip()
            yield f"redis://{host}:{container.get_exposed_port(6379)}/0"
        return
    url = os.environ.get("PROBE_TEST_REDIS_URL")
    if not url:
        pytest.fail(
            "Redis is needed: no Docker engine answers and PROBE_TEST_REDIS_URL is unset "
            "(e.g. redis://127.0.0.1:6379/0)"
        )
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis at PROBE_TEST_REDIS_URL={url} is unreachable: {exc}")
    finally:
        client.close()
    yield url


@pytest.fixture
def redis_namespace(redis_url: str) -> Iterator[str]:
    """A fresh key namespace for one test; its keys are deleted afterwards."""
    with fresh_redis_namespace(redis_url) as namespace:
        yield namespace


@pytest.fixture(scope="session")
def runtime() -> SandboxRuntime:
    """The verified pinned runtime; FAILS (never skips) when it is not installed."""
    try:
        return locate_runtime()
    except SandboxUnavailable as exc:
        pytest.fail(f"Sandbox Runtime unavailable ({exc.reason}): {exc} -- run `make setup`")


@pytest.fixture
def stub_sandbox() -> StubSandbox:
    """The stub sandbox (``tests/stubsandbox.py``) answering exit 0 with no output, for a
    test that is not about running a probe; pass it as ``backend=``."""
    return StubSandbox()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty directory standing for a repository root."""
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.fixture(scope="session")
def migrated_sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded store's database file, migrated once per session by ``open_store``.

    Stores the fixtures hand out start from a copy (``seed_state``): the same schema the
    migrations build, built once instead of once per test (they cost ~0.1 s each, hundreds
    of times per run). Tests of the migrations themselves open their own stores.
    """
    root = tmp_path_factory.mktemp("migrated-store")
    open_store(root).close()
    db_path = root / STATE_DIRNAME / DB_FILENAME
    leftovers = [p.name for p in db_path.parent.iterdir() if p.name.startswith(DB_FILENAME + "-")]
    assert leftovers == [], f"the template store did not close cleanly: {leftovers}"
    return db_path


def seed_state(root: Path, migrated: Path) -> Path:
    """Create ``root`` holding an empty embedded store at the newest schema; return it."""
    root.mkdir()
    shutil.copy2(migrated, prepare_state_dir(root) / DB_FILENAME)
    return root


@pytest.fixture
def sqlite_store(tmp_path: Path, migrated_sqlite_file: Path) -> Iterator[Store]:
    """The embedded store, in its own state directory."""
    store = open_store(seed_state(tmp_path / "state", migrated_sqlite_file))
    yield store
    store.close()


@pytest.fixture(scope="session")
def migrated_pg_script(postgres_base_url: str) -> str | None:
    """The SQL that rebuilds a store schema the migrations made, as ``pg_dump`` prints it,
    with ``_SCHEMA_TOKEN`` where the schema name goes; None when ``pg_dump`` is missing or cannot
    dump this server (then each ``pg_store`` runs the migrations itself).

    Like ``migrated_sqlite_file``: one migration per session instead of one per test; a
    schema is filled from it in one round trip. Tests of the migrations use ``pg_url``,
    which is always empty.
    """
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        return None
    url = make_url(postgres_base_url)
    with fresh_schema(postgres_base_url) as schema_url, tempfile.TemporaryDirectory() as tmp:
        open_store(Path(tmp), schema_url).close()
        schema = _schema_of(schema_url)
        done = subprocess.run(
            [
                pg_dump,
                "--schema",
                schema,
                "--inserts",
                "--no-owner",
                "--no-privileges",
                "--host",
                url.host or "127.0.0.1",
                "--port",
                str(url.port or 5432),
                "--username",
                url.username or "postgres",
                url.database or "postgres",
            ],
            env={**os.environ, "PGPASSWORD": url.password or ""},
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        return None
    # The session settings pg_dump starts with (an empty search_path among them) stay out:
    # the replay runs on a connection of its own, in the new schema.
    body = done.stdout.split(f"CREATE SCHEMA {schema};", 1)[1]
    # psql's own meta-commands (newer pg_dump wraps the dump in \restrict) are not SQL.
    body = "\n".join(line for line in body.splitlines() if not line.startswith("\\"))
    return body.replace(f"{schema}.", f"{_SCHEMA_TOKEN}.")


_SCHEMA_TOKEN = "__probe_test_schema__"


def _schema_of(url: str) -> str:
    options = unquote(make_url(url).query["options"])  # type: ignore[arg-type]
    return options.removeprefix("-csearch_path=")


def replay_pg_script(url: str, script: str, token: str) -> None:
    """Run ``script`` (``pg_dump``'s, ``token`` where its schema's name stood) in the schema
    ``url``'s search_path names, in one round trip."""
    engine = create_engine(url)
    try:
        raw = engine.raw_connection()
        try:
            # The driver's own execute: no parameters, so '%' in a trigger body stays '%'.
            cursor = raw.cursor()
            cursor.execute(script.replace(token, _schema_of(url)))
            raw.commit()
        finally:
            raw.close()
    finally:
        engine.dispose()


class MigratedSchemaPool:
    """Migrated store schemas, reset and handed out again instead of built per test.

    Building a schema (CREATE SCHEMA, the migrated script, DROP SCHEMA ... CASCADE) costs the
    server about 0.3 s of catalog work, a hundred times per run; emptying the tables of one a
    test is done with costs a few milliseconds. A schema goes back to the pool only when it is
    provably as new: its catalog (tables, columns, constraints, indexes, triggers and their
    enabled state, functions and their bodies) matches the fingerprint taken when it was built,
    and the reset finished within its lock timeout (a test that left a connection holding locks
    loses its schema to the slow path instead of stalling the next one). One pool per pytest
    process, so xdist workers never share a schema.
    """

    def __init__(self, base_url: str, script: str | None) -> None:
        self.base_url = base_url
        self.script = script
        # What a fresh schema holds besides its DDL: the migrations' own rows and sequences.
        self.seed = (
            "\n".join(
                line
                for line in script.splitlines()
                if line.startswith(("INSERT INTO", "SELECT pg_catalog.setval("))
            )
            if script is not None
            else ""
        )
        self.free: list[str] = []
        self.built: list[str] = []
        self.fingerprints: dict[str, str] = {}
        self.admin = create_engine(base_url, pool_pre_ping=True)

    def take(self, tmp_path: Path) -> str:
        if self.free:
            return self.free.pop()
        schema = f"t_{uuid.uuid4().hex[:12]}"
        with self.admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        self.built.append(schema)
        url = _schema_url(self.base_url, schema)
        if self.script is not None:
            replay_pg_script(url, self.script, _SCHEMA_TOKEN)
        else:
            open_store(tmp_path / "migrate", url).close()
        self.fingerprints[schema] = self.fingerprint(schema)
        return url

    def fingerprint(self, schema: str) -> str:
        with self.admin.connect() as conn:
            return str(conn.execute(text(_FINGERPRINT_SQL), {"schema": schema}).scalar_one())

    def give_back(self, url: str) -> None:
        if self.script is None:  # no dump to know the migrations' own rows by
            return
        schema = _schema_of(url)
        try:
            with self.admin.begin() as conn:
                conn.execute(text("SET LOCAL lock_timeout = '2s'"))
                # Triggers (the append-only guards, foreign keys) stay out of the reset.
                conn.execute(text("SET LOCAL session_replication_role = replica"))
                tables = conn.execute(
                    text("SELECT tablename FROM pg_tables WHERE schemaname = :schema"),
                    {"schema": schema},
                ).scalars()
                for table in tables:  # names from the catalog, not from a test
                    conn.execute(text(f'DELETE FROM "{schema}"."{table}"'))  # noqa: S608
                conn.exec_driver_sql(self.seed.replace(_SCHEMA_TOKEN, f'"{schema}"'))
        except Exception:  # a held lock or a dropped table: this schema is not reusable
            return
        if self.fingerprint(schema) == self.fingerprints[schema]:
            self.free.append(url)

    def close(self) -> None:
        for schema in self.built:
            with self.admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        self.admin.dispose()


#: One digest of everything a test could change in a schema's definition.
_FINGERPRINT_SQL = """
SELECT md5(coalesce(string_agg(item, '|' ORDER BY item), '')) FROM (
    SELECT 'c:' || c.relname || ':' || c.relkind::text AS item
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :schema
    UNION ALL
    SELECT 'a:' || c.relname || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod)
        || ':' || a.attnotnull::text || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE n.nspname = :schema AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'k:' || conname || ':' || pg_get_constraintdef(k.oid)
    FROM pg_constraint k JOIN pg_namespace n ON n.oid = k.connamespace WHERE n.nspname = :schema
    UNION ALL
    SELECT 'i:' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :schema
    UNION ALL
    SELECT 't:' || pg_get_triggerdef(t.oid) || ':' || t.tgenabled::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :schema
    UNION ALL
    SELECT 'f:' || p.proname || ':' || md5(p.prosrc)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = :schema
) AS catalog
"""


def _schema_url(base_url: str, schema: str) -> str:
    sep = "&" if "?" in base_url else "?"
    return f"{base_url}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture(scope="session")
def pg_schema_pool(
    postgres_base_url: str, migrated_pg_script: str | None
) -> Iterator[MigratedSchemaPool]:
    pool = MigratedSchemaPool(postgres_base_url, migrated_pg_script)
    yield pool
    pool.close()


@pytest.fixture
def pg_migrated_url(tmp_path: Path, pg_schema_pool: MigratedSchemaPool) -> Iterator[str]:
    """A URL whose search_path is a store schema at the newest revision, holding no rows
    but the migrations' own."""
    url = pg_schema_pool.take(tmp_path)
    yield url
    pg_schema_pool.give_back(url)


@pytest.fixture
def pg_store(tmp_path: Path, pg_migrated_url: str) -> Iterator[Store]:
    """A PostgreSQL store at the newest revision, in a schema no other test is using."""
    store = open_store(tmp_path, pg_migrated_url)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest) -> Store:
    """Each backend in turn: the same test must hold on both."""
    name = "sqlite_store" if request.param == "sqlite" else "pg_store"
    store: Store = request.getfixturevalue(name)
    return store


def make_searchable(path: Path) -> None:
    """Let the unprivileged probe uids traverse ``path`` and its ancestors (not list them).

    pytest creates its temporary directories mode 0700; a probe runs as its own
    uid and must reach the snapshot, scratch and pinned executables it is given.
    """
    top = Path(tempfile.gettempdir())
    for current in [path, *path.parents]:
        if current == top or current == Path("/"):
            break
        if current.stat().st_uid == os.geteuid():
            current.chmod(current.stat().st_mode | 0o111)


@pytest.fixture(scope="session", autouse=True)
def _stop_launchers() -> Iterator[None]:
    """The process's persistent launchers are stopped when the session ends."""
    yield
    close_default_launchers()
    close_default_snapshot_cache()
    close_default_slots()


@pytest.fixture(autouse=True)
def _patient_launchers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Widen the persistent launcher's answer bounds: on a loaded machine Node may take
    seconds to start, and which path a run takes is what tests check, never how fast the
    helper answers (a test of the bound itself shortens it again)."""
    monkeypatch.setattr(launcher_helper, "INIT_SECONDS", 600.0)
    monkeypatch.setattr(launcher_helper, "REPLY_SECONDS", 300.0)


@pytest.fixture(autouse=True)
def _searchable_tmp_path(request: pytest.FixtureRequest) -> None:
    """Every test's tmp_path is searchable by the probe uids (see ``make_searchable``)."""
    if "tmp_path" in request.fixturenames:
        make_searchable(request.getfixturevalue("tmp_path"))


#: Fixtures that reach a real service, and the marker each implies.
_SERVICE_MARKERS = {
    "runtime": "sandbox",
    "postgres_base_url": "postgres",
    "pg_url": "postgres",
    "pg_store": "postgres",
    "redis_url": "redis",
    "redis_namespace": "redis",
}

#: Tests that take more than a few seconds or launch many probes: attacks, farms, state
#: machines, decoder fuzzers (each feeds 60-150 inputs, comparing the store around each),
#: crash injection, the walkthrough. `make quick` (`-m "not slow"`) leaves them out;
#: `make test` and `make security` run them.
SLOW_PATHS = (
    "tests/security/",
    "tests/crash/",
    "tests/fuzz/",
    "tests/queue/test_reliability.py",
    "tests/claims/test_state_machine.py",
    "tests/sandbox/test_limits.py",
    "tests/sandbox/test_network.py",
    "tests/test_walkthrough.py",
    # One scenario through every face (API, host and MCP subprocesses), like the walkthrough:
    # the two costliest tests of the quick loop (30 s and 7 s on the loaded machine).
    "tests/faces/test_parity.py",
    "tests/faces/test_bad_input.py",
    "tests/faces/test_recheck_faces.py",
    # Starts pytest sessions of its own to check `make test`'s two passes.
    "tests/test_exclusive.py",
)

#: Fixtures that make a test slow wherever it lives: ``start_farm`` starts real worker
#: processes (supervisor, dramatiq, migrations, the janitor) and stops them with SIGTERM,
#: 8-13 s a test on an idle machine.
SLOW_FIXTURES = frozenset({"start_farm"})

#: Tests that must run with no other test beside them, marked ``exclusive``: the attacks
#: fill host-wide kernel tables (``fs.aio-max-nr``, the pseudo-terminal pool, ...) that any
#: concurrent run would meet full, and read those tables to tell ``host_resource`` from a
#: refutation; the network tests own the fixed test-host address (198.51.100.2) and remove
#: every other test host they find. `make test` runs the rest on several processes first,
#: then these one at a time; beside other xdist workers they fail (`pytest_runtest_setup`).
EXCLUSIVE_PATHS = ("tests/security/",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by the services its fixtures reach and, by path, whether it is slow."""
    root = Path(str(config.rootpath))
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("any_store") == "postgresql":
            fixtures.add("pg_store")
        for fixture, marker in _SERVICE_MARKERS.items():
            if fixture in fixtures:
                item.add_marker(marker)
        relative = Path(str(item.path)).relative_to(root).as_posix()
        if relative.startswith(SLOW_PATHS) or fixtures & SLOW_FIXTURES:
            item.add_marker("slow")
        if relative.startswith(EXCLUSIVE_PATHS):
            item.add_marker("exclusive")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail an ``exclusive`` test that would run beside other xdist workers' tests: it would
    fill the host-wide tables their runs need, or meet theirs full, and pass or fail by luck."""
    workers = int(getattr(item.config, "workerinput", {}).get("workercount", 1))
    if workers > 1 and item.get_closest_marker("exclusive") is not None:
        pytest.fail(
            f"{item.nodeid} is marked exclusive and must run alone, not beside {workers - 1} "
            "other xdist workers: `make test` runs it after the rest; or run "
            "`pytest -m exclusive` without -n",
            pytrace=False,
        )
