"""Loading and refusing policy files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import PolicyError
from probe_service.policies import check_policy_file, find_policy, load_policy_file
from probe_service.settings import read_settings

from .conftest import VALID_POLICY, Writer, document

REPO = Path(__file__).resolve().parents[2]


def _with(**changes: Any) -> dict[str, Any]:
    return {**VALID_POLICY, **changes}


class TestLocation:
    def test_env_override_is_used(self) -> None:
        """BYTE_PROBE_POLICY_FILE names the policy file when set."""
        settings = read_settings({"BYTE_PROBE_POLICY_FILE": "/etc/p.json"})
        assert settings.policy_file == Path("/etc/p.json")

    def test_default_is_under_home(self, tmp_path: Path) -> None:
        """Without the override the file is ~/.zyte/agent/probe-policies.json."""
        settings = read_settings({"HOME": str(tmp_path)})
        assert settings.policy_file == tmp_path / ".zyte" / "agent" / "probe-policies.json"

    def test_check_reads_the_configured_file(
        self, monkeypatch: pytest.MonkeyPatch, write_policy_file: Writer
    ) -> None:
        """check_policy_file reads the file the environment's settings name."""
        monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(write_policy_file(document())))
        policies = check_policy_file(read_settings().policy_file)
        assert [p.id for p in policies] == ["local-python-no-network"]


class TestExample:
    def test_example_file_loads(self) -> None:
        """The shipped example validates and holds the two documented policies."""
        example = REPO / "policies" / "probe-policies.example.json"
        policies = {p.id: p for p in load_policy_file(example).policies}
        assert policies["local-python-no-network"].allowed_executables == ("python3",)
        assert set(policies["local-shell-no-network"].allowed_executables) >= {
            "true",
            "cat",
            "sh",
            "echo",
        }

    def test_find_policy_is_exact(self, write_policy_file: Writer) -> None:
        """A policy is found by exact id and a near miss is refused."""
        loaded = load_policy_file(write_policy_file(document()))
        assert find_policy(loaded, "local-python-no-network").id == "local-python-no-network"
        with pytest.raises(PolicyError):
            find_policy(loaded, "local-python")


class TestPermissions:
    def test_group_writable_is_refused(self, write_policy_file: Writer) -> None:
        """A group-writable policy file is refused, naming the path."""
        path = write_policy_file(document(), mode=0o620)
        with pytest.raises(PolicyError, match="group- or world-writable") as caught:
            load_policy_file(path)
        assert str(path) in str(caught.value)

    def test_world_writable_is_refused(self, write_policy_file: Writer) -> None:
        """A world-writable policy file is refused."""
        with pytest.raises(PolicyError, match="world-writable"):
            load_policy_file(write_policy_file(document(), mode=0o606))

    def test_directory_is_refused(self, tmp_path: Path) -> None:
        """A directory in place of the file is refused as non-regular."""
        (tmp_path / "dir.json").mkdir()
        with pytest.raises(PolicyError, match="not a regular file"):
            load_policy_file(tmp_path / "dir.json")

    def test_fifo_is_refused(self, tmp_path: Path) -> None:
        """A FIFO is refused without blocking."""
        os.mkfifo(tmp_path / "fifo.json")
        with pytest.raises(PolicyError, match="not a regular file"):
            load_policy_file(tmp_path / "fifo.json")

    def test_symlink_to_non_regular_is_refused(self, tmp_path: Path) -> None:
        """A symlink to a non-regular file is refused."""
        (tmp_path / "target").mkdir()
        (tmp_path / "link.json").symlink_to(tmp_path / "target")
        with pytest.raises(PolicyError, match="not a regular file"):
            load_policy_file(tmp_path / "link.json")

    def test_symlink_to_writable_file_is_refused(
        self, tmp_path: Path, write_policy_file: Writer
    ) -> None:
        """Permissions are checked on the link's target, not the link."""
        target = write_policy_file(document(), mode=0o666)
        (tmp_path / "link.json").symlink_to(target)
        with pytest.raises(PolicyError, match="writable"):
            load_policy_file(tmp_path / "link.json")

    def test_missing_file_is_refused(self, tmp_path: Path) -> None:
        """A missing policy file is a PolicyError naming the path."""
        with pytest.raises(PolicyError, match=r"absent\.json"):
            load_policy_file(tmp_path / "absent.json")


class TestContent:
    @pytest.mark.parametrize(
        ("doc", "field"),
        [
            (document(extra=1), "extra"),
            (document(_with(unknown_flag=True)), "policies.0.unknown_flag"),
            (document(VALID_POLICY, VALID_POLICY), "duplicate policy id"),
            (document(schema=4), "schema"),
            (document(_with(max_open_files=256), schema=2), "need schema 3"),
            (document(_with(confirm_refutes=False)), "need schema 3"),
            (document(_with(max_open_files=15), schema=3), "max_open_files"),
            (document(_with(max_open_files=65537), schema=3), "max_open_files"),
            (document(_with(confirm_refutes="no"), schema=3), "confirm_refutes"),
            (document(_with(allowed_ports=[8080])), "need schema 2"),
            (document(_with(scratch_inodes=1000)), "scratch_inodes"),
            (document(_with(allowed_ports=[0]), schema=2), "allowed_ports"),
            (document(_with(allowed_ports=[65536]), schema=2), "allowed_ports"),
            (document(_with(allowed_ports=[443, 443]), schema=2), "allowed_ports"),
            (document(_with(allowed_ports=[]), schema=2), "allowed_ports"),
            (document(_with(scratch_inodes=15), schema=2), "scratch_inodes"),
            (document(_with(scratch_inodes=2**24 + 1), schema=2), "scratch_inodes"),
            (document(_with(timeout_seconds=-1)), "timeout_seconds"),
            (document(_with(timeout_seconds=10**9)), "timeout_seconds"),
            (document(_with(max_output_bytes=0)), "max_output_bytes"),
            (document(_with(max_output_bytes=10**12)), "max_output_bytes"),
            (document(_with(memory_bytes=-5)), "memory_bytes"),
            (document(_with(max_processes=10**6)), "max_processes"),
            (document(_with(scratch_bytes=-1)), "scratch_bytes"),
            (document(_with(allowed_executables=["/usr/bin/python3"])), "allowed_executables"),
            (document(_with(allowed_domains=["*"])), "allowed_domains"),
            (document(_with(environment=["BAD-NAME"])), "environment"),
            (document(_with(executable_pins={"python3": "bin/python3"})), "executable_pins"),
            (document(_with(executable_pins={"ruby": "/usr/bin/ruby"})), "not allowed"),
        ],
    )
    def test_invalid_content_is_refused_naming_the_field(
        self, write_policy_file: Writer, doc: dict[str, Any], field: str
    ) -> None:
        """Unknown keys, duplicates, wrong schema and absurd limits are refused by field."""
        path = write_policy_file(doc)
        with pytest.raises(PolicyError) as caught:
            load_policy_file(path)
        assert field in str(caught.value)
        assert str(path) in str(caught.value)

    def test_a_validator_refusal_reads_as_every_face_words_it(
        self, write_policy_file: Writer
    ) -> None:
        """A validator's refusal names the path and field, without pydantic's prefix."""
        path = write_policy_file(document(_with(allowed_executables=["/usr/bin/python3"])))
        with pytest.raises(PolicyError) as caught:
            load_policy_file(path)
        assert str(caught.value) == (
            f"{path}: policies.0.allowed_executables.0: executable name must be a bare file "
            "name, got '/usr/bin/python3'"
        )

    def test_schema_1_means_default_ports_and_no_inode_limit(
        self, write_policy_file: Writer
    ) -> None:
        """A schema-1 file is read unchanged: ports 80 and 443, no scratch inode limit."""
        policy = check_policy_file(write_policy_file(document()))[0]
        assert (policy.allowed_ports, policy.scratch_inodes) == ((80, 443), None)

    def test_schema_2_reads_ports_and_inodes(self, write_policy_file: Writer) -> None:
        """A schema-2 file sets allowed_ports (kept sorted) and scratch_inodes."""
        doc = document(_with(allowed_ports=[8443, 22, 80], scratch_inodes=4096), schema=2)
        policy = check_policy_file(write_policy_file(doc))[0]
        assert (policy.allowed_ports, policy.scratch_inodes) == ((22, 80, 8443), 4096)

    def test_schema_3_reads_open_files_and_confirmation(self, write_policy_file: Writer) -> None:
        """A schema-3 file sets max_open_files and confirm_refutes; older files mean unset."""
        doc = document(_with(max_open_files=256, confirm_refutes=False), schema=3)
        policy = check_policy_file(write_policy_file(doc))[0]
        assert (policy.max_open_files, policy.confirm_refutes) == (256, False)
        older = check_policy_file(write_policy_file(document(schema=2)))[0]
        assert (older.max_open_files, older.confirm_refutes) == (None, None)

    def test_duplicate_json_keys_are_refused(self, write_policy_file: Writer) -> None:
        """A JSON object repeating a key is refused instead of keeping the last value."""
        text = '{"schema": 1, "schema": 1, "policies": []}'
        with pytest.raises(PolicyError, match="duplicate key"):
            load_policy_file(write_policy_file(text))

    def test_invalid_json_is_refused(self, write_policy_file: Writer) -> None:
        """Malformed JSON is a PolicyError, not a crash."""
        with pytest.raises(PolicyError, match="not valid JSON"):
            load_policy_file(write_policy_file("{"))

    def test_policies_are_frozen(self, write_policy_file: Writer) -> None:
        """A loaded policy cannot be mutated."""
        policy = check_policy_file(write_policy_file(document()))[0]
        with pytest.raises(ValueError, match="frozen"):
            policy.timeout_seconds = 99  # type: ignore[misc]
