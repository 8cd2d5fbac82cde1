"""Plan models: every refused field is named, limits hold, and the id is content-derived."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probe_service.errors import InvalidPlan
from probe_service.plans import LIMITS, parse_plan, plan_id_of

from .conftest import SNAPSHOT_ID, TRUSTED_SOURCES, oracle_doc, plan_doc


def refused(doc: object) -> str:
    """Parse ``doc`` expecting InvalidPlan; return its message."""
    with pytest.raises(InvalidPlan) as info:
        parse_plan(doc)
    return str(info.value)


def regex_oracle(pattern: str) -> dict[str, Any]:
    return oracle_doc({"kind": "stdout_regex", "pattern": pattern})


def scratch_oracle(path: str) -> dict[str, Any]:
    return oracle_doc({"kind": "scratch_file_equals", "path": path, "text": ""})


def test_a_validator_refusal_reads_as_every_face_words_it() -> None:
    """A validator's refusal names the field and says why, without pydantic's prefix."""
    message = refused(plan_doc(executable="/bin/sh"))
    assert message == "executable: must be a bare executable name the policy allows, not a path"


class TestRefusedPaths:
    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"fixtures": [{"path": "/etc/passwd", "content": "x"}]}, "fixtures.0.path"),
            ({"interventions": [{"path": "/etc/passwd", "content": "x"}]}, "interventions.0.path"),
            ({"oracle": scratch_oracle("/etc/passwd")}, "oracle.check.path"),
            ({"cwd": "/tmp"}, "cwd"),
        ],
    )
    def test_absolute_path(self, overrides: dict[str, Any], field: str) -> None:
        """An absolute path is refused, naming the field."""
        message = refused(plan_doc(**overrides))
        assert message.startswith(f"{field}:")
        assert "absolute" in message

    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"fixtures": [{"path": "../up", "content": "x"}]}, "fixtures.0.path"),
            ({"interventions": [{"path": "a/../../b", "content": "x"}]}, "interventions.0.path"),
            ({"oracle": scratch_oracle("a/..")}, "oracle.check.path"),
            ({"cwd": ".."}, "cwd"),
        ],
    )
    def test_dot_dot_component(self, overrides: dict[str, Any], field: str) -> None:
        """A '..' component is refused, naming the field."""
        assert refused(plan_doc(**overrides)).startswith(f"{field}:")

    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"fixtures": [{"path": "a\x00b", "content": "x"}]}, "fixtures.0.path"),
            ({"interventions": [{"path": "a\x00", "content": "x"}]}, "interventions.0.path"),
            ({"args": ["ok", "a\x00b"]}, "args.1"),
        ],
    )
    def test_nul_byte(self, overrides: dict[str, Any], field: str) -> None:
        """A NUL byte in a path or argument is refused, naming the field."""
        message = refused(plan_doc(**overrides))
        assert message.startswith(f"{field}:")
        assert "NUL" in message

    @pytest.mark.parametrize(
        "path", [".git/config", ".git/hooks/pre-commit", "sub/.git/HEAD", ".zyte/db", "a/.zyte"]
    )
    def test_intervention_into_reserved_directory(self, path: str) -> None:
        """An intervention writing into .git or .zyte at any depth is refused."""
        message = refused(plan_doc(interventions=[{"path": path, "content": "x"}]))
        assert message.startswith("interventions.0.path:")
        assert ".git or .zyte" in message

    def test_fixture_into_reserved_directory(self) -> None:
        """A fixture under a .git directory of scratch is refused too."""
        message = refused(plan_doc(fixtures=[{"path": ".git/x", "content": "x"}]))
        assert message.startswith("fixtures.0.path:")

    def test_duplicate_fixture_paths(self) -> None:
        """Two fixtures with one path are refused, naming the second."""
        fixtures = [{"path": "a", "content": "1"}, {"path": "a", "content": "2"}]
        message = refused(plan_doc(fixtures=fixtures))
        assert message.startswith("fixtures.1.path:")
        assert "duplicate" in message

    def test_duplicate_intervention_paths(self) -> None:
        """A delete and a write of one path are refused as duplicates."""
        interventions = [{"path": "a", "delete": True}, {"path": "a", "content": "2"}]
        message = refused(plan_doc(interventions=interventions))
        assert message.startswith("interventions.1.path:")
        assert "duplicate" in message

    def test_same_path_in_fixtures_and_interventions_allowed(self) -> None:
        """Scratch and snapshot are separate trees, so one path may appear in each."""
        plan = parse_plan(
            plan_doc(
                fixtures=[{"path": "a", "content": "1"}],
                interventions=[{"path": "a", "content": "2"}],
            )
        )
        assert plan.fixtures[0].path == plan.interventions[0].path == "a"


class TestNonUtf8Content:
    @pytest.mark.parametrize(
        ("fragment", "field"),
        [
            ('"fixtures": [{"path": "f", "content": "\\ud800"}]', "fixtures.0.content"),
            ('"interventions": [{"path": "f", "content": "x\\udfff"}]', "interventions.0.content"),
            ('"args": ["ok", "\\ud800"]', "args.1"),
            ('"hypothesis": "\\ud800"', "hypothesis"),
        ],
    )
    def test_lone_surrogate_in_json_text(self, fragment: str, field: str) -> None:
        """A lone surrogate escape in the JSON text is refused, naming the field."""
        text = json.dumps(plan_doc())[:-1] + ", " + fragment + "}"
        assert refused(text).startswith(f"{field}:")

    def test_lone_surrogate_in_decoded_value(self) -> None:
        """A lone surrogate in an already-decoded value is refused, naming the field."""
        message = refused(plan_doc(fixtures=[{"path": "f", "content": "\ud800"}]))
        assert message.startswith("fixtures.0.content:")

    def test_lone_surrogate_in_reference(self) -> None:
        """A lone surrogate in the oracle reference is refused, naming the field."""
        message = refused(plan_doc(oracle=oracle_doc(reference="spec \ud800")))
        assert message.startswith("oracle.reference:")

    def test_valid_surrogate_pair_accepted(self) -> None:
        """A properly paired escape (an emoji) is ordinary UTF-8 and accepted."""
        text = json.dumps(plan_doc(hypothesis="\U0001f600"))
        assert "\\ud83d\\ude00" in text
        assert parse_plan(text).hypothesis == "\U0001f600"


class TestLimits:
    def test_argument_count(self) -> None:
        """One argument more than max_args is refused, naming args."""
        message = refused(plan_doc(args=["a"] * (LIMITS.max_args + 1)))
        assert message.startswith("args:")
        assert str(LIMITS.max_args) in message

    def test_argument_count_at_limit_accepted(self) -> None:
        """Exactly max_args arguments is accepted."""
        assert len(parse_plan(plan_doc(args=["a"] * LIMITS.max_args)).args) == LIMITS.max_args

    def test_argument_bytes_counted_in_utf8(self) -> None:
        """An argument over max_arg_bytes in UTF-8 (not characters) is refused."""
        arg = "\u00e9" * (LIMITS.max_arg_bytes // 2 + 1)  # fewer chars than bytes
        assert len(arg) < LIMITS.max_arg_bytes
        message = refused(plan_doc(args=["ok", arg]))
        assert message.startswith("args.1:")

    @pytest.mark.parametrize("group", ["fixtures", "interventions"])
    def test_file_count(self, group: str) -> None:
        """One file more than max_files is refused, naming the group."""
        files = [{"path": f"f{i}", "content": ""} for i in range(LIMITS.max_files + 1)]
        message = refused(plan_doc(**{group: files}))
        assert message.startswith(f"{group}:")
        assert str(LIMITS.max_files) in message

    @pytest.mark.parametrize("group", ["fixtures", "interventions"])
    def test_file_bytes(self, group: str) -> None:
        """One file over max_file_bytes is refused, naming that file's content."""
        files = [
            {"path": "small", "content": "x"},
            {"path": "big", "content": "x" * (LIMITS.max_file_bytes + 1)},
        ]
        assert refused(plan_doc(**{group: files})).startswith(f"{group}.1.content:")

    @pytest.mark.parametrize("group", ["fixtures", "interventions"])
    def test_total_bytes(self, group: str) -> None:
        """Files each within the limit but together over max_total_file_bytes are refused."""
        count = LIMITS.max_total_file_bytes // LIMITS.max_file_bytes + 1
        files = [{"path": f"f{i}", "content": "x" * LIMITS.max_file_bytes} for i in range(count)]
        message = refused(plan_doc(**{group: files}))
        assert message.startswith(f"{group}:")
        assert str(LIMITS.max_total_file_bytes) in message

    @pytest.mark.parametrize("kind", ["stdout_equals", "stdout_contains"])
    def test_check_text(self, kind: str) -> None:
        """A check text over max_text_bytes is refused, naming oracle.check.text."""
        check = {"kind": kind, "text": "x" * (LIMITS.max_text_bytes + 1)}
        assert refused(plan_doc(oracle=oracle_doc(check))).startswith("oracle.check.text:")

    def test_scratch_check_text(self) -> None:
        """A scratch_file_equals text over max_text_bytes is refused, naming it."""
        check = {
            "kind": "scratch_file_equals",
            "path": "out",
            "text": "x" * (LIMITS.max_text_bytes + 1),
        }
        assert refused(plan_doc(oracle=oracle_doc(check))).startswith("oracle.check.text:")

    def test_pattern(self) -> None:
        """A pattern over max_pattern_chars is refused, naming oracle.check.pattern."""
        message = refused(plan_doc(oracle=regex_oracle("a" * (LIMITS.max_pattern_chars + 1))))
        assert message.startswith("oracle.check.pattern:")

    def test_hypothesis(self) -> None:
        """A hypothesis over max_hypothesis_chars is refused, naming it."""
        message = refused(plan_doc(hypothesis="h" * (LIMITS.max_hypothesis_chars + 1)))
        assert message.startswith("hypothesis:")

    def test_reference(self) -> None:
        """A reference over max_reference_chars is refused, naming oracle.reference."""
        long_reference = "r" * (LIMITS.max_reference_chars + 1)
        message = refused(plan_doc(oracle=oracle_doc(reference=long_reference)))
        assert message.startswith("oracle.reference:")


class TestUnknownFields:
    def test_top_level(self) -> None:
        """An unknown top-level key is refused, naming it."""
        assert refused(plan_doc(network=True)).startswith("network:")

    def test_in_oracle(self) -> None:
        """An unknown key in the oracle is refused, naming its path."""
        oracle = oracle_doc()
        oracle["trust_me"] = True
        assert refused(plan_doc(oracle=oracle)).startswith("oracle.trust_me:")

    def test_in_check(self) -> None:
        """An unknown key inside the check is refused, naming it."""
        message = refused(plan_doc(oracle=oracle_doc({"kind": "exit_code", "equals": 0, "x": 1})))
        assert message.startswith("oracle.check.")
        assert message.split(":")[0].endswith(".x")

    def test_in_fixture(self) -> None:
        """An unknown key in a fixture is refused, naming it."""
        fixtures = [{"path": "a", "content": "", "mode": 493}]
        assert refused(plan_doc(fixtures=fixtures)).startswith("fixtures.0.mode:")

    def test_in_intervention(self) -> None:
        """An unknown key in an intervention is refused, naming it."""
        interventions = [{"path": "a", "content": "", "follow_links": True}]
        message = refused(plan_doc(interventions=interventions))
        assert message.startswith("interventions.0.follow_links:")

    def test_unknown_check_kind(self) -> None:
        """A check kind that does not exist is refused, naming oracle.check."""
        message = refused(plan_doc(oracle=oracle_doc({"kind": "always_true"})))
        assert message.startswith("oracle.check")


class TestOracleDeclaration:
    @pytest.mark.parametrize("source", TRUSTED_SOURCES)
    @pytest.mark.parametrize("reference", [None, "", "   \t"])
    def test_trusted_source_needs_reference(self, source: str, reference: str | None) -> None:
        """Every trusted source without a concrete reference is refused, naming the oracle."""
        message = refused(plan_doc(oracle=oracle_doc(source=source, reference=reference)))
        assert message.startswith("oracle:")
        assert source in message

    def test_model_inferred_needs_no_reference(self) -> None:
        """A model_inferred oracle may omit the reference."""
        plan = parse_plan(plan_doc(oracle=oracle_doc(source="model_inferred", reference=None)))
        assert plan.oracle.reference == ""

    def test_unknown_source(self) -> None:
        """A source outside the five declared ones is refused."""
        assert refused(plan_doc(oracle=oracle_doc(source="vibes"))).startswith("oracle.source:")


class TestExecutable:
    @pytest.mark.parametrize("name", ["/usr/bin/python3", "bin/python3", "./python3", ".", ".."])
    def test_path_refused(self, name: str) -> None:
        """An executable given as a path (or a dot name) is refused, naming executable."""
        assert refused(plan_doc(executable=name)).startswith("executable:")

    def test_empty_refused(self) -> None:
        """An empty executable name is refused."""
        assert refused(plan_doc(executable="")).startswith("executable:")


class TestInterventionShape:
    def test_content_and_delete(self) -> None:
        """An intervention with both content and delete is refused, naming it."""
        message = refused(plan_doc(interventions=[{"path": "a", "content": "", "delete": True}]))
        assert message.startswith("interventions.0:")

    def test_neither_content_nor_delete(self) -> None:
        """An intervention with neither content nor delete is refused, naming it."""
        message = refused(plan_doc(interventions=[{"path": "a"}]))
        assert message.startswith("interventions.0:")

    def test_empty_content_is_a_write(self) -> None:
        """Empty content is a write of an empty file, not 'no content'."""
        plan = parse_plan(plan_doc(interventions=[{"path": "a", "content": ""}]))
        assert plan.interventions[0].content == ""
        assert plan.interventions[0].delete is False


class TestStrictTypes:
    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"oracle": oracle_doc({"kind": "exit_code", "equals": "1"})}, "oracle.check"),
            ({"oracle": oracle_doc({"kind": "exit_code", "equals": 1.0})}, "oracle.check"),
            ({"failure_refutes": "true"}, "failure_refutes"),
            ({"failure_refutes": 1}, "failure_refutes"),
            ({"args": [1]}, "args.0"),
            ({"args": "-c"}, "args"),
            ({"hypothesis": 5}, "hypothesis"),
            ({"interventions": [{"path": "a", "delete": "yes"}]}, "interventions.0.delete"),
        ],
    )
    def test_no_coercion(self, overrides: dict[str, Any], field: str) -> None:
        """A value of the wrong JSON type is refused rather than coerced."""
        assert refused(plan_doc(**overrides)).startswith(field)

    @pytest.mark.parametrize("snapshot_id", ["A" * 64, "a" * 63, "g" * 64, ""])
    def test_snapshot_id_is_lowercase_sha256(self, snapshot_id: str) -> None:
        """A snapshot id that is not 64 lowercase hex digits is refused."""
        assert refused(plan_doc(snapshot_id=snapshot_id)).startswith("snapshot_id:")

    def test_missing_required_field(self) -> None:
        """A plan without an oracle is refused, naming oracle."""
        doc = plan_doc()
        del doc["oracle"]
        assert refused(doc).startswith("oracle:")

    @pytest.mark.parametrize("text", ["{", "[1, 2]", "null", "", "\ufeff{}"])
    def test_not_a_json_object(self, text: str) -> None:
        """Text that is not a JSON object is refused as the whole plan."""
        assert refused(text).startswith("plan")


class TestPlanId:
    def test_id_is_sha256_of_canonical_json(self) -> None:
        """The id equals SHA-256 over sorted-key, compact, UTF-8 JSON of the full plan."""
        plan = parse_plan(plan_doc(hypothesis="caf\u00e9 ok"))
        expected_document = {
            "args": ["-c", "print(1)"],
            "cwd": ".",
            "executable": "python3",
            "failure_refutes": False,
            "fixtures": [],
            "hypothesis": "caf\u00e9 ok",
            "interventions": [],
            "oracle": {
                "check": {"equals": 0, "kind": "exit_code"},
                "reference": "issue #1",
                "source": "user_requirement",
            },
            "policy_id": "test-policy",
            "snapshot_id": SNAPSHOT_ID,
        }
        raw = (
            '{"args":["-c","print(1)"],"cwd":".","executable":"python3",'
            '"failure_refutes":false,"fixtures":[],"hypothesis":"caf\u00e9 ok",'
            '"interventions":[],"oracle":{"check":{"equals":0,"kind":"exit_code"},'
            '"reference":"issue #1","source":"user_requirement"},"policy_id":"test-policy",'
            f'"snapshot_id":"{SNAPSHOT_ID}"}}'
        ).encode()
        assert json.loads(raw) == expected_document
        assert plan_id_of(plan) == hashlib.sha256(raw).hexdigest()

    def test_defaults_written_out_equal_defaults_left_out(self) -> None:
        """Spelling out a default value gives the same plan id as omitting it."""
        explicit = plan_doc(cwd=".", fixtures=[], interventions=[], failure_refutes=False)
        assert plan_id_of(parse_plan(explicit)) == plan_id_of(parse_plan(plan_doc()))

    def test_canonical_round_trip(self) -> None:
        """Parsing a plan's canonical form gives back the same plan and id."""
        plan = parse_plan(
            plan_doc(
                fixtures=[{"path": "in/a.txt", "content": "x"}],
                interventions=[{"path": "gone.py", "delete": True}],
            )
        )
        again = parse_plan(plan.canonical())
        assert again == plan
        assert plan_id_of(again) == plan_id_of(plan)


_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
    max_size=12,
)
_REFERENCE = _TEXT.filter(lambda s: s.strip() != "")
_NAME = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)


@st.composite
def plan_documents(draw: st.DrawFn) -> dict[str, Any]:
    """Valid plan documents varying every kind of field."""
    check = draw(
        st.one_of(
            st.builds(lambda n: {"kind": "exit_code", "equals": n}, st.integers(-300, 300)),
            st.builds(lambda t: {"kind": "stdout_contains", "text": t}, _TEXT),
            st.builds(lambda t: {"kind": "stdout_regex", "pattern": t}, _TEXT),
            st.builds(
                lambda p, t: {"kind": "scratch_file_equals", "path": p, "text": t}, _NAME, _TEXT
            ),
        )
    )
    names = draw(st.lists(_NAME, max_size=3, unique=True))
    return plan_doc(
        snapshot_id=draw(st.from_regex(r"[0-9a-f]{64}", fullmatch=True)),
        policy_id=draw(_NAME),
        executable=draw(_NAME),
        args=draw(st.lists(_TEXT, max_size=4)),
        fixtures=[{"path": n, "content": draw(_TEXT)} for n in names],
        interventions=[{"path": f"src/{n}", "delete": True} for n in names],
        oracle=oracle_doc(check, draw(st.sampled_from(TRUSTED_SOURCES)), draw(_REFERENCE)),
        failure_refutes=draw(st.booleans()),
        hypothesis=draw(_TEXT),
    )


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


# Each mutation sets one field to a value that is still valid and differs from the old one.
_MUTATIONS: dict[str, Any] = {
    "policy_id": lambda d, draw: draw(_NAME.filter(lambda v: v != d["policy_id"])),
    "executable": lambda d, draw: draw(_NAME.filter(lambda v: v != d["executable"])),
    "args": lambda d, draw: draw(st.lists(_TEXT, max_size=4).filter(lambda v: v != d["args"])),
    "hypothesis": lambda d, draw: draw(_TEXT.filter(lambda v: v != d["hypothesis"])),
    "failure_refutes": lambda d, draw: not d["failure_refutes"],
    "cwd": lambda d, draw: draw(_NAME),
    "snapshot_id": lambda d, draw: draw(
        st.from_regex(r"[0-9a-f]{64}", fullmatch=True).filter(lambda v: v != d["snapshot_id"])
    ),
}


class TestPlanIdProperties:
    @settings(max_examples=40, deadline=None)
    @given(
        doc=plan_documents(),
        rng=st.randoms(use_true_random=False),
        indent=st.sampled_from([None, 0, 1, 4, "\t"]),
        ascii_only=st.booleans(),
    )
    def test_key_order_and_whitespace_never_change_the_id(
        self, doc: dict[str, Any], rng: random.Random, indent: int | str | None, ascii_only: bool
    ) -> None:
        """The id depends on content only, not on how the JSON text was laid out."""
        reference_id = plan_id_of(parse_plan(json.dumps(doc)))
        text = json.dumps(_shuffled(doc, rng), indent=indent, ensure_ascii=ascii_only)
        assert plan_id_of(parse_plan(text)) == reference_id
        assert plan_id_of(parse_plan(" \n" + text + "\n\t")) == reference_id

    @settings(max_examples=50, deadline=None)
    @given(doc=plan_documents(), field=st.sampled_from(sorted(_MUTATIONS)), data=st.data())
    def test_any_field_change_changes_the_id(
        self, doc: dict[str, Any], field: str, data: st.DataObject
    ) -> None:
        """Changing any one field's value gives a different id."""
        changed = dict(doc)
        changed[field] = _MUTATIONS[field](doc, data.draw)
        assert plan_id_of(parse_plan(changed)) != plan_id_of(parse_plan(doc))

    @settings(max_examples=40, deadline=None)
    @given(doc=plan_documents(), data=st.data())
    def test_any_oracle_change_changes_the_id(
        self, doc: dict[str, Any], data: st.DataObject
    ) -> None:
        """Changing the oracle's source, reference or check gives a different id."""
        oracle = dict(doc["oracle"])
        what = data.draw(st.sampled_from(["source", "reference", "check"]))
        if what == "source":
            oracle["source"] = data.draw(
                st.sampled_from([*TRUSTED_SOURCES, "model_inferred"]).filter(
                    lambda s: s != oracle["source"]
                )
            )
        elif what == "reference":
            oracle["reference"] = data.draw(_REFERENCE.filter(lambda r: r != oracle["reference"]))
        else:
            oracle["check"] = {"kind": "stdout_equals", "text": data.draw(_TEXT)}
        assert plan_id_of(parse_plan(plan_doc(**{**doc, "oracle": oracle}))) != plan_id_of(
            parse_plan(doc)
        )
