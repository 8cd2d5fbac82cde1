"""Turn postures in the policy file (schema 3; docs/ARCHITECTURE.md, "The agent's turn")."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.errors import PolicyError
from probe_service.policies import load_policy_file, policy_digest, turn_posture
from probe_service.policies.postures import TurnPosture, posture_for

from .conftest import VALID_POLICY, Writer, document


def entry(root: str, posture: str, scope: str | None = None) -> TurnPosture:
    return TurnPosture(root=root, posture=posture, scope=scope)  # type: ignore[arg-type]


class TestPostureFor:
    def test_nothing_named_is_block(self) -> None:
        """A root and scope no entry names get the default, block."""
        assert posture_for([], "/srv/app", "web") == "block"
        assert posture_for([entry("/srv/other", "report")], "/srv/app", "web") == "block"

    def test_an_entry_covers_its_subdirectories_but_not_a_sibling_prefix(self) -> None:
        """/srv/app covers /srv/app/web, never /srv/application."""
        entries = [entry("/srv/app", "warn")]
        assert posture_for(entries, "/srv/app/web", "web") == "warn"
        assert posture_for(entries, "/srv/application", "web") == "block"

    def test_the_longest_root_wins_then_the_named_scope(self) -> None:
        """A deeper root beats a shallower one; a named scope beats none at the same root."""
        entries = [
            entry("/srv", "report"),
            entry("/srv/app", "warn"),
            entry("/srv/app", "block", scope="payments"),
        ]
        assert posture_for(entries, "/srv/app", "web") == "warn"
        assert posture_for(entries, "/srv/app", "payments") == "block"
        assert posture_for(entries, "/srv/lib", "web") == "report"


class TestPolicyFile:
    def test_schema_3_reads_turn_postures(self, write_policy_file: Writer) -> None:
        """A schema-3 file's entries set the posture of their root and scope."""
        doc = document(schema=3, turn_postures=[{"root": "/srv/app", "posture": "warn"}])
        path = write_policy_file(doc)
        assert turn_posture(path, "/srv/app", "web") == "warn"

    @pytest.mark.parametrize("schema", [1, 2])
    def test_older_schemas_may_not_name_them(self, write_policy_file: Writer, schema: int) -> None:
        """turn_postures in a schema-1 or schema-2 file is refused by name."""
        doc = document(schema=schema, turn_postures=[{"root": "/srv/app", "posture": "warn"}])
        with pytest.raises(PolicyError, match="turn_postures needs schema 3"):
            load_policy_file(write_policy_file(doc))

    @pytest.mark.parametrize(
        ("bad", "named"),
        [
            ({"root": "relative", "posture": "warn"}, "not an absolute path"),
            ({"root": "/srv", "posture": "off"}, "posture"),
            ({"root": "/srv", "posture": "warn", "extra": 1}, "extra"),
        ],
    )
    def test_a_bad_entry_is_refused(
        self, write_policy_file: Writer, bad: dict[str, object], named: str
    ) -> None:
        """A relative root, an unknown posture or an unknown key is refused."""
        with pytest.raises(PolicyError, match=named):
            load_policy_file(write_policy_file(document(schema=3, turn_postures=[bad])))

    def test_postures_change_no_policy_digest(self, write_policy_file: Writer) -> None:
        """A file-level key: every policy keeps the digest it has without it (and in schema 1)."""
        plain = load_policy_file(write_policy_file(document(), name="one.json"))
        with_postures = load_policy_file(
            write_policy_file(
                document(schema=3, turn_postures=[{"root": "/srv", "posture": "report"}]),
                name="three.json",
            )
        )
        assert policy_digest(with_postures.policies[0]) == policy_digest(plain.policies[0])
        assert with_postures.policies[0].id == VALID_POLICY["id"]

    def test_no_file_is_block(self, tmp_path: Path) -> None:
        """Without a policy file every turn is under block."""
        assert turn_posture(tmp_path / "absent.json", "/srv/app", "web") == "block"
