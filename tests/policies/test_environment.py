"""Schema 3's environment: fixed values beside pass-through names, and the names a plan may
set (docs/ARCHITECTURE.md, "Probe environment")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import PolicyError
from probe_service.policies import Policy, load_policy_file, policy_digest
from probe_service.policies.model import passed_environment, probe_environment
from probe_service.sandbox.policy_check import environment_warnings, verify_policy_file

from .conftest import VALID_POLICY, Writer, document

#: Names no plan may ever set, each in spellings a hostile plan or a careless file might use.
RESERVED_SPELLINGS = [
    "HOME",
    "home",
    "Home",
    "TMPDIR",
    "tmpdir",
    "XDG_CACHE_HOME",
    "PYTHONDONTWRITEBYTECODE",
    "BYTE_PROBE_SCRATCH",
    "BYTE_PROBE_NET_GUARD",
    "byte_probe_anything",
    "ZYTE_AGENT_POLICY_FILE",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "no_proxy",
    "LD_PRELOAD",
    "ld_preload",
    "Ld_Library_Path",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "LOCPATH",
    "MALLOC_CHECK_",
]


def schema_3(**policy: Any) -> dict[str, Any]:
    return document({**VALID_POLICY, **policy}, schema=3)


class TestFixedValues:
    def test_an_object_fixes_values_and_null_passes_the_workers(self) -> None:
        """{"LANG": "C.UTF-8", "PATH": null}: LANG is fixed, PATH is the worker's."""
        policy = Policy.model_validate(
            {**VALID_POLICY, "environment": {"LANG": "C.UTF-8", "PATH": None}}
        )
        assert policy.fixed_environment == {"LANG": "C.UTF-8"}
        assert policy.passthrough_environment == ("PATH",)
        worker = {"LANG": "de_DE.UTF-8", "PATH": "/w/bin:/usr/bin"}
        assert passed_environment(policy, worker) == {"LANG": "C.UTF-8", "PATH": "/w/bin:/usr/bin"}
        assert passed_environment(policy, {}) == {"LANG": "C.UTF-8"}

    def test_an_object_of_nulls_is_the_list_with_its_digest(self) -> None:
        """Only pass-through names, written as an object, are the same policy as the list."""
        listed = Policy.model_validate({**VALID_POLICY, "environment": ["LANG", "PATH"]})
        nulls = Policy.model_validate({**VALID_POLICY, "environment": {"LANG": None, "PATH": None}})
        assert nulls.environment == ("LANG", "PATH")
        assert policy_digest(nulls) == policy_digest(listed)

    def test_fixed_values_count_in_the_digest(self) -> None:
        """Another fixed value is another policy."""
        one = Policy.model_validate({**VALID_POLICY, "environment": {"LANG": "C.UTF-8"}})
        two = Policy.model_validate({**VALID_POLICY, "environment": {"LANG": "C"}})
        assert policy_digest(one) != policy_digest(two)

    @pytest.mark.parametrize(
        ("environment", "named"),
        [
            ({"HOME": "/root"}, "HOME"),
            ({"ld_preload": "/x.so"}, "ld_preload"),
            ({"PATH": ":/usr/bin"}, "PATH: entry 0 is empty"),
            ({"PYTHONPATH": "src"}, "PYTHONPATH: entry 0 'src' is relative"),
            ({"LANG": "C\x00"}, "NUL"),
            ({"LANG": "x" * 5000}, "4096 bytes"),
            ({"A=B": "x"}, "A=B"),
        ],
    )
    def test_a_bad_fixed_value_is_refused_naming_it(
        self, write_policy_file: Writer, environment: dict[str, str], named: str
    ) -> None:
        """Runner-owned names, unsafe search paths, NUL, oversized values and malformed
        names are refused when the file loads, naming the variable."""
        path = write_policy_file(schema_3(environment=environment))
        with pytest.raises(PolicyError, match="environment") as caught:
            load_policy_file(path)
        assert named in str(caught.value)

    def test_older_schemas_may_not_fix_values(self, write_policy_file: Writer) -> None:
        """A schema-2 file with an environment object is refused: that needs schema 3."""
        path = write_policy_file(document({**VALID_POLICY, "environment": {"LANG": "C"}}, schema=2))
        with pytest.raises(PolicyError, match="fixed values needs schema 3"):
            load_policy_file(path)


class TestPlanEnvironment:
    def test_a_schema_3_policy_lists_names_a_plan_may_set(self, write_policy_file: Writer) -> None:
        """plan_environment is read from a schema-3 file."""
        path = write_policy_file(schema_3(plan_environment=["PYTHONPATH", "PYTEST_ADDOPTS"]))
        (policy,) = load_policy_file(path).policies
        assert policy.plan_environment == ("PYTHONPATH", "PYTEST_ADDOPTS")

    def test_older_schemas_may_not_name_it(self, write_policy_file: Writer) -> None:
        """A schema-1 or schema-2 policy naming plan_environment is refused."""
        for schema in (1, 2):
            path = write_policy_file(
                document({**VALID_POLICY, "plan_environment": ["PYTHONPATH"]}, schema=schema)
            )
            with pytest.raises(PolicyError, match=r"plan_environment.*need schema 3"):
                load_policy_file(path)

    @pytest.mark.parametrize("name", RESERVED_SPELLINGS)
    def test_a_reserved_name_in_any_spelling_is_refused(
        self, write_policy_file: Writer, name: str
    ) -> None:
        """No administrator can let a plan set a runner-owned, proxy or loader name."""
        path = write_policy_file(schema_3(plan_environment=[name]))
        with pytest.raises(PolicyError, match="a plan may never set it"):
            load_policy_file(path)

    def test_names_differing_only_in_case_are_one_name(self, write_policy_file: Writer) -> None:
        """PYTHONPATH and pythonpath listed together are refused as a duplicate."""
        path = write_policy_file(schema_3(plan_environment=["PYTHONPATH", "pythonpath"]))
        with pytest.raises(PolicyError, match="unique"):
            load_policy_file(path)

    def test_precedence_policy_below_plan(self) -> None:
        """Policy values (the worker's or fixed) are overridden by a plan's value for a
        name the policy lists; a name it does not list never passes."""
        policy = Policy.model_validate(
            {
                **VALID_POLICY,
                "environment": {"LANG": "C.UTF-8", "PATH": None, "PYTHONPATH": "/opt/lib"},
                "plan_environment": ["PYTHONPATH", "LANG"],
            }
        )
        worker = {"PATH": "/usr/bin", "PYTHONPATH": "/worker"}
        plan = {"PYTHONPATH": "src", "LANG": "C", "EDITOR": "vi"}
        assert probe_environment(policy, worker, plan) == {
            "LANG": "C",
            "PATH": "/usr/bin",
            "PYTHONPATH": "src",
        }
        assert probe_environment(policy, worker, {}) == {
            "LANG": "C.UTF-8",
            "PATH": "/usr/bin",
            "PYTHONPATH": "/opt/lib",
        }


class TestSchema1And2Unchanged:
    def test_the_digest_of_every_older_shape_holds(self, write_policy_file: Writer) -> None:
        """A schema-1 and a schema-2 file read unchanged: the digest schema-1 code recorded,
        and the same policy as schema 3 has it too."""
        recorded = "664cf28b3a4fc57f2ae7d1b229b2debd34bff9cbf9a72e9d4bf264c320027f3c"
        for schema in (1, 2, 3):
            path = write_policy_file(document(dict(VALID_POLICY), schema=schema))
            (policy,) = load_policy_file(path).policies
            assert policy_digest(policy) == recorded, schema


class TestPolicyCheckWarns:
    def test_pass_through_names_are_warned_about(self, write_policy_file: Writer) -> None:
        """policy check warns about names whose value is the worker's, not about fixed ones,
        the runner's own or proxy names."""
        path = write_policy_file(
            schema_3(environment={"LANG": "C.UTF-8", "PATH": None, "TMPDIR": None})
        )
        (report,) = verify_policy_file(path)
        (warning,) = report.warnings
        assert warning.startswith("environment: PATH pass the worker's value")
        fixed = Policy.model_validate({**VALID_POLICY, "environment": {"LANG": "C"}})
        assert environment_warnings(fixed) == []
        proxies = Policy.model_validate({**VALID_POLICY, "environment": ["HOME", "HTTP_PROXY"]})
        assert environment_warnings(proxies) == []

    def test_the_cli_prints_the_warning_and_still_passes(
        self, write_policy_file: Writer, tmp_path: Path
    ) -> None:
        """`policy check` exits 0 with the warning on stderr, the JSON on stdout."""
        import json
        import subprocess
        import sys

        path = write_policy_file(document(dict(VALID_POLICY), schema=1))
        done = subprocess.run(
            [sys.executable, "-m", "probe_service.cli", "policy", "check", "--file", str(path),
             "--json"],
            capture_output=True, text=True, cwd=tmp_path, check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "warning: policy local-python-no-network: environment: LANG, LC_ALL, PATH" in (
            done.stderr
        )
        (report,) = json.loads(done.stdout)["policies"]
        assert report["warnings"]
        assert "worker's value" in report["warnings"][0]
