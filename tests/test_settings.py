"""``Settings``: one reader of the environment, its compatibility names, and its refusals
(docs/ARCHITECTURE.md, "Settings" and "Environment names kept for compatibility")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from probe_service.errors import SettingsError
from probe_service.settings import (
    COMPATIBILITY_PREFIX,
    SETTINGS,
    Setting,
    compatibility_name,
    read_settings,
)

PACKAGE = Path(__file__).resolve().parents[1] / "probe_service"
README = PACKAGE.parent / "README.md"
ARCHITECTURE = PACKAGE.parent / "docs" / "ARCHITECTURE.md"
#: The settings with a ``ZYTE_AGENT_`` spelling (all but the standard ``XDG_CACHE_HOME``).
ALIASED = [s for s in SETTINGS if s.alias is not None]


class TestOneReader:
    def test_nothing_else_reads_the_environment(self) -> None:
        """Only settings.py reads ``os.environ`` / ``os.getenv`` / ``os.environb``; every
        other module gets its configuration from a ``Settings``."""
        pattern = re.compile(r"\bos\.(environ|environb|getenv|getenvb|putenv|unsetenv)\b")
        readers = []
        for path in sorted(PACKAGE.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if pattern.search(text) or re.search(r"from os import [^\n]*\benviron\b", text):
                readers.append(str(path.relative_to(PACKAGE)))
        assert readers == ["settings.py"]

    def test_every_subprocess_gets_an_explicit_environment(self) -> None:
        """Every ``subprocess.run``/``Popen`` call in the package passes ``env=``: a child
        never inherits the live environment (the settings' copy, or a fixed one)."""
        missing = []
        for path in sorted(PACKAGE.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                    continue
                if node.func.attr not in ("run", "Popen", "call", "check_call", "check_output"):
                    continue
                if not (
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
                ):
                    continue
                if not any(k.arg == "env" for k in node.keywords):
                    missing.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
        assert missing == []

    def test_the_copy_is_frozen_at_read(self) -> None:
        """The settings keep the mapping they were read from; a later change of the source
        changes nothing they hand out (the probe's environment comes from this copy)."""
        source = {"LANG": "C.UTF-8", "HOME": "/home/x"}
        settings = read_settings(source)
        source["LANG"] = "changed"
        assert settings.environment["LANG"] == "C.UTF-8"
        with pytest.raises(TypeError):
            settings.environment["LANG"] = "x"  # type: ignore[index]

    def test_defaults(self, tmp_path: Path) -> None:
        """Nothing set: the documented defaults, the policy file and key under HOME."""
        settings = read_settings({"HOME": str(tmp_path)})
        assert settings.policy_file == tmp_path / ".zyte" / "agent" / "probe-policies.json"
        assert settings.signing_key == tmp_path / ".zyte" / "agent" / "signing-key.pem"
        assert not settings.signing_key_named
        assert (settings.database_url, settings.redis_url) == (None, None)
        assert settings.redis_namespace == "byte-probe"
        assert (settings.lease_ms, settings.max_attempts) == (30_000, 3)
        assert (settings.resend_after_ms, settings.janitor_interval_ms) == (300_000, 5_000)
        assert settings.metrics_port == 9191
        assert settings.capture_roots == ()
        assert settings.cache_dir == tmp_path / ".cache"

    def test_an_empty_value_is_unset(self) -> None:
        """``PROBE_REDIS_URL=`` is no broker, and an empty namespace the default, as before."""
        settings = read_settings({"PROBE_REDIS_URL": "", "PROBE_REDIS_NAMESPACE": ""})
        assert settings.redis_url is None
        assert settings.redis_namespace == "byte-probe"

    def test_secrets_are_not_in_the_repr(self) -> None:
        """A logged settings object shows neither the token nor a URL with a password."""
        settings = read_settings(
            {"BYTE_PROBE_WEB_TOKEN": "s3cret-token-abcdef", "PROBE_DATABASE_URL": "pg://u:pw@h"}
        )
        assert "s3cret" not in repr(settings)
        assert "pw@h" not in repr(settings)


class TestBadValues:
    @pytest.mark.parametrize(
        ("name", "value", "message"),
        [
            ("PROBE_LEASE_MS", "30s", "PROBE_LEASE_MS: '30s' is not an integer"),
            ("PROBE_MAX_ATTEMPTS", "0", "PROBE_MAX_ATTEMPTS: 0 must be at least 1"),
            ("PROBE_RESEND_AFTER_MS", "-1", "PROBE_RESEND_AFTER_MS: -1 must be at least 0"),
            ("PROBE_JANITOR_INTERVAL_MS", "x", "PROBE_JANITOR_INTERVAL_MS: 'x' is not an"),
            ("PROBE_METRICS_PORT", "70000", "PROBE_METRICS_PORT: 70000 must be between 0 and"),
            ("BYTE_PROBE_CAPTURE_ROOTS", "/srv:rel", "BYTE_PROBE_CAPTURE_ROOTS: 'rel' is not an"),
        ],
    )
    def test_a_bad_value_is_refused_naming_the_variable(
        self, name: str, value: str, message: str
    ) -> None:
        """A value the setting cannot take is a SettingsError that names the variable."""
        with pytest.raises(SettingsError, match=re.escape(message)):
            read_settings({name: value})

    def test_a_bad_compatibility_value_names_that_spelling(self) -> None:
        """Refused under its ``ZYTE_AGENT_`` name, the message names the name that was set."""
        with pytest.raises(SettingsError, match="ZYTE_AGENT_LEASE_MS: 'soon' is not"):
            read_settings({"ZYTE_AGENT_LEASE_MS": "soon"})

    def test_the_cli_refuses_at_start_in_one_line(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A command refuses a bad setting with one line on stderr and exit 3, before it
        opens (and so creates) any store."""
        from probe_service.cli import main

        monkeypatch.setenv("PROBE_LEASE_MS", "x")
        code = main(["store", "migrate", "--root", str(tmp_path / "state")])
        assert code == 3
        assert capsys.readouterr().err.splitlines() == [
            "byte-probe: error: PROBE_LEASE_MS: 'x' is not an integer"
        ]
        assert not (tmp_path / "state").exists()


class TestCompatibilityNames:
    def test_every_setting_has_one_and_none_collide(self) -> None:
        """Each prefixed setting's ``ZYTE_AGENT_`` name is distinct from every other setting's
        names (two settings never share one spelling)."""
        names = [s.name for s in SETTINGS]
        aliases = [s.alias for s in SETTINGS if s.alias is not None]
        assert len(set(names)) == len(names)
        assert len(set(aliases)) == len(aliases)
        assert set(aliases).isdisjoint(names)
        prefixed = [s for s in SETTINGS if s.name.startswith(("PROBE_", "BYTE_PROBE_"))]
        assert all(s.alias and s.alias.startswith(COMPATIBILITY_PREFIX) for s in prefixed)

    def test_the_rule(self) -> None:
        """The name's own prefix is replaced: PROBE_ and BYTE_PROBE_ alike."""
        assert compatibility_name("PROBE_REDIS_URL") == "ZYTE_AGENT_REDIS_URL"
        assert compatibility_name("BYTE_PROBE_POLICY_FILE") == "ZYTE_AGENT_POLICY_FILE"
        assert compatibility_name("XDG_CACHE_HOME") is None

    @pytest.mark.parametrize("setting", ALIASED, ids=lambda s: s.name)
    def test_each_is_read_under_its_compatibility_name(self, setting: Setting) -> None:
        """Set only under ``ZYTE_AGENT_…``, a setting takes that value."""
        assert setting.alias is not None
        value = _sample(setting.name)
        under_alias = getattr(read_settings({setting.alias: value}), setting.field)
        assert under_alias == getattr(read_settings({setting.name: value}), setting.field)
        assert under_alias != getattr(read_settings({}), setting.field)

    def test_both_names_with_one_value_is_fine(self) -> None:
        """The same value under both names is one setting."""
        both = {"PROBE_REDIS_URL": "redis://a", "ZYTE_AGENT_REDIS_URL": "redis://a"}
        assert read_settings(both).redis_url == "redis://a"

    def test_both_names_with_different_values_is_refused(self) -> None:
        """Different values under both names: refused at start, naming both."""
        both = {"BYTE_PROBE_POLICY_FILE": "/a.json", "ZYTE_AGENT_POLICY_FILE": "/b.json"}
        with pytest.raises(SettingsError) as refused:
            read_settings(both)
        assert "BYTE_PROBE_POLICY_FILE" in str(refused.value)
        assert "ZYTE_AGENT_POLICY_FILE" in str(refused.value)

    def test_a_compatibility_key_name_must_load(self, tmp_path: Path) -> None:
        """A signing key named under the compatibility name is named: it must load."""
        settings = read_settings({"ZYTE_AGENT_SIGNING_KEY": str(tmp_path / "missing.pem")})
        assert settings.signing_key_named
        assert settings.signing_key == tmp_path / "missing.pem"

    @pytest.mark.parametrize("document", [README, ARCHITECTURE], ids=lambda p: p.name)
    def test_the_documented_table_lists_every_setting(self, document: Path) -> None:
        """README and docs/ARCHITECTURE.md list every setting with its compatibility name."""
        text = document.read_text(encoding="utf-8")
        start = text.index("Environment names kept for compatibility")
        table = text[start : start + 6000]
        for setting in SETTINGS:
            assert f"`{setting.name}`" in table, setting.name
            if setting.alias:
                assert f"`{setting.alias}`" in table, setting.alias


def _sample(name: str) -> str:
    """A valid value for the setting ``name``."""
    if name.endswith(("_MS", "_ATTEMPTS", "_PORT")):
        return "7"
    if name.endswith(("_FILE", "_KEY", "_DIR", "_ROOTS", "_SOCKET")):
        return "/srv/x"
    return "value"


class TestServeSocket:
    def test_a_relative_socket_path_is_refused(self) -> None:
        """PROBE_SERVE_SOCKET must be absolute: a client's working directory must not pick
        which socket it trusts."""
        with pytest.raises(SettingsError, match="PROBE_SERVE_SOCKET"):
            read_settings({"PROBE_SERVE_SOCKET": "serve.sock"})

    def test_unset_means_in_process(self) -> None:
        """Without the setting no client uses the local service."""
        assert read_settings({}).serve_socket is None
