"""The policy file's safety rules, applied to toolchain roots and pins (each tries to break one)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from probe_service.errors import PolicyError
from probe_service.policies import Policy, load_policy_file, policy_digest

from .conftest import BASE_PYTHON, PolicyWriter, make_tree, policy_entry


def _with_toolchain(root: Path, **overrides: object) -> dict[str, object]:
    return policy_entry(
        toolchains={"small": str(root)},
        executable_pins={"sh": "/usr/bin/dash", "python3": f"{root}/bin/python"},
        **overrides,
    )


class TestRefusals:
    def test_toolchain_inside_a_repository_is_refused(
        self, tmp_path: Path, write_policy: PolicyWriter
    ) -> None:
        """A toolchain in a git work tree is refused, naming the toolchain and the repository."""
        repo = tmp_path / "repo"
        (repo / ".git").mkdir(parents=True)
        root = make_tree(repo / "venv")
        path = write_policy(_with_toolchain(root))
        with pytest.raises(PolicyError, match=r"toolchain 'small' .* inside a repository"):
            load_policy_file(path)

    def test_group_writable_toolchain_is_refused(
        self, tree: Path, write_policy: PolicyWriter
    ) -> None:
        """A group-writable toolchain root is refused, naming it."""
        tree.chmod(0o775)
        with pytest.raises(PolicyError, match=r"'small' .* group- or world-writable"):
            load_policy_file(write_policy(_with_toolchain(tree)))

    def test_world_writable_toolchain_is_refused(
        self, tree: Path, write_policy: PolicyWriter
    ) -> None:
        """A world-writable toolchain root is refused, naming it."""
        tree.chmod(0o757)
        with pytest.raises(PolicyError, match=r"'small' .* group- or world-writable"):
            load_policy_file(write_policy(_with_toolchain(tree)))

    def test_linked_toolchain_is_refused(
        self, tree: Path, tmp_path: Path, write_policy: PolicyWriter
    ) -> None:
        """A toolchain root that is a symbolic link is refused, naming it."""
        link = tmp_path / "linked"
        link.symlink_to(tree)
        with pytest.raises(PolicyError, match=r"'small' .* is a symbolic link"):
            load_policy_file(write_policy(_with_toolchain(link)))

    def test_toolchain_under_a_linked_directory_is_refused(
        self, tree: Path, tmp_path: Path, write_policy: PolicyWriter
    ) -> None:
        """A root reached through a linked ancestor is refused: the link could be swapped."""
        link = tmp_path / "via"
        link.symlink_to(tree.parent)
        with pytest.raises(PolicyError, match=r"lies under a symbolic link"):
            load_policy_file(write_policy(_with_toolchain(link / tree.name)))

    def test_toolchain_of_another_owner_is_refused(
        self, tree: Path, write_policy: PolicyWriter
    ) -> None:
        """A root owned by another uid (not root, not us) is refused."""
        os.chown(tree, 12345, 12345)
        with pytest.raises(PolicyError, match=r"owned by uid 12345"):
            load_policy_file(write_policy(_with_toolchain(tree)))

    def test_ancestor_others_can_write_is_refused(
        self, tree: Path, write_policy: PolicyWriter
    ) -> None:
        """An ancestor others may write (not sticky) is refused: they could rename the root."""
        tree.parent.chmod(0o777)
        with pytest.raises(PolicyError, match=r"ancestor .* lets others replace it"):
            load_policy_file(write_policy(_with_toolchain(tree)))

    def test_pin_climbing_out_of_its_toolchain_is_refused(self, tree: Path) -> None:
        """A pin written under a toolchain root with '..' is refused by the model."""
        entry = _with_toolchain(tree)
        entry["executable_pins"] = {"python3": f"{tree}/bin/../../evil/python"}
        with pytest.raises(ValueError, match=r"lies outside its toolchain 'small'"):
            Policy.model_validate(entry)

    def test_pin_linking_out_of_its_toolchain_is_refused(
        self, tree: Path, tmp_path: Path, write_policy: PolicyWriter
    ) -> None:
        """A pin inside a toolchain that links to a file elsewhere (not a system dir) is refused."""
        outside = tmp_path / "evil-python"
        outside.write_text("#!/bin/sh\n")
        outside.chmod(0o755)
        (tree / "bin" / "evil").symlink_to(outside)
        entry = _with_toolchain(tree)
        entry["executable_pins"] = {"python3": f"{tree}/bin/evil"}
        with pytest.raises(PolicyError, match=r"pin for 'python3' .* outside its toolchain"):
            load_policy_file(write_policy(entry))

    def test_overlapping_toolchains_are_refused(self, tree: Path) -> None:
        """Two toolchains where one contains the other are refused, naming both."""
        entry = policy_entry(toolchains={"a": str(tree), "b": f"{tree}/lib"})
        with pytest.raises(ValueError, match=r"toolchains 'a' and 'b' overlap"):
            Policy.model_validate(entry)

    def test_schema_1_may_not_name_toolchains(self, tree: Path, write_policy: PolicyWriter) -> None:
        """toolchains is a schema-2 key; a schema-1 file naming it is refused."""
        path = write_policy(_with_toolchain(tree))
        document = json.loads(path.read_text())
        path.write_text(json.dumps({**document, "schema": 1}))
        with pytest.raises(PolicyError, match=r"toolchains.*need schema 2"):
            load_policy_file(path)


class TestAccepted:
    def test_pin_to_the_base_interpreter_is_accepted(
        self, tree: Path, write_policy: PolicyWriter
    ) -> None:
        """A virtualenv's bin/python linking to the system interpreter is a valid pin."""
        loaded = load_policy_file(write_policy(_with_toolchain(tree)))
        assert loaded.policies[0].toolchains == {"small": str(tree)}
        assert os.path.realpath(loaded.policies[0].executable_pins["python3"]) == str(
            Path(os.path.realpath(BASE_PYTHON))
        )

    def test_toolchains_count_in_the_digest(self, tree: Path) -> None:
        """Naming a toolchain changes the policy digest; naming none keeps the old digest."""
        plain = Policy.model_validate(policy_entry())
        empty = Policy.model_validate(policy_entry(toolchains={}))
        named = Policy.model_validate(policy_entry(toolchains={"small": str(tree)}))
        moved = Policy.model_validate(policy_entry(toolchains={"small": f"{tree}/lib"}))
        assert policy_digest(plain) == policy_digest(empty)
        assert len({policy_digest(plain), policy_digest(named), policy_digest(moved)}) == 3

    def test_missing_toolchain_leaves_other_policies_usable(
        self, tmp_path: Path, write_policy: PolicyWriter
    ) -> None:
        """A toolchain not installed on this machine does not refuse the whole file."""
        missing = tmp_path / "not-installed"
        loaded = load_policy_file(write_policy(_with_toolchain(missing), policy_entry(id="other")))
        assert [p.id for p in loaded.policies] == ["python-tests", "other"]
