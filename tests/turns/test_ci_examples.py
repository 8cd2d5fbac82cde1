"""``examples/ci/``: the GitHub Actions workflow and the GitLab CI job parse, install from
the package, and their gate scripts, run here with bash on a real repository and store,
report only by default and fail the job under PROBE_GATE_ENFORCE=1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import yaml

from .gitrepo import SCOPE, STATEMENT, claimed_repo, git, stale_edit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ci"
ZERO = "0" * 40


def load(name: str) -> dict[Any, Any]:
    document = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def github_job() -> dict[str, Any]:
    job: dict[str, Any] = load("github-actions.yml")["jobs"]["gate"]
    return job


def gate_step() -> dict[str, Any]:
    (step,) = [s for s in github_job()["steps"] if s.get("id") == "gate"]
    return step


@pytest.fixture
def checkout(tmp_path: Path, migrated_sqlite_file: Path, policy_path: Path) -> Path:
    """A clone as the runner has it: a claimed commit, then one moving the claim's file."""
    repo = claimed_repo(tmp_path / "checkout", migrated_sqlite_file, policy_path)
    stale_edit(repo)
    git(repo, "commit", "-q", "-am", "semicolons")
    return repo


def run_script(
    script: str, checkout: Path, tmp_path: Path, **env: str
) -> tuple[int, str, subprocess.CompletedProcess[str]]:
    """Run ``script`` with bash in ``checkout``, as the runner would; the exit code and the
    job summary written."""
    summary = tmp_path / "step-summary.md"
    summary.write_text("")
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_STEP_SUMMARY": str(summary),
        "PROBE_DATABASE_URL": "",  # an unset secret: the embedded store of the checkout
        "BYTE_PROBE_POLICY_FILE": str(tmp_path / "absent-policies.json"),
        "PROBE_GATE_SCOPE": SCOPE,
        **env,
    }
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, summary.read_text(), done


class TestGitHubWorkflow:
    def test_it_installs_from_the_package_and_keeps_the_reports(self) -> None:
        """pip install, no make setup; full history; the JUnit uploaded even on failure;
        report-only unless the one setting says 1."""
        job = github_job()
        runs = " ".join(s.get("run", "") for s in job["steps"])
        assert "pip install" in runs
        assert "make" not in runs
        assert job["steps"][0]["with"]["fetch-depth"] == 0
        (upload,) = [s for s in job["steps"] if "upload-artifact" in s.get("uses", "")]
        assert (upload["if"], upload["with"]["path"]) == ("always()", "byte-probe-gate.xml")
        assert "'0'" in job["env"]["PROBE_GATE_ENFORCE"]
        assert '"$GITHUB_STEP_SUMMARY"' in gate_step()["run"]
        assert "${{" not in gate_step()["run"]  # expressions only in env: nothing injected
        assert set(load("github-actions.yml")[True]) == {"push", "pull_request"}  # `on:`

    def test_report_only_passes_a_failing_gate_and_says_so(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        """The stale change: exit 0, the summary shows the closed gate, the JUnit fails."""
        base = git(checkout, "rev-parse", "HEAD~1").stdout.strip()
        head = git(checkout, "rev-parse", "HEAD").stdout.strip()
        code, summary, done = run_script(
            gate_step()["run"], checkout, tmp_path, PROBE_GATE_BASE=base, PROBE_GATE_HEAD=head
        )
        assert code == 0, done.stderr
        assert "❌ byte-probe gate closed" in summary
        assert STATEMENT.replace("_", "\\_") in summary
        assert "Report-only" in summary
        assert "::warning::byte-probe gate failed (exit 1)" in done.stdout
        suite = ET.parse(checkout / "byte-probe-gate.xml").getroot()  # noqa: S314 - our own file
        assert int(suite.get("failures", "0")) >= 2  # the gate and the claim's obligation

    def test_enforce_fails_the_job_on_a_failing_gate(self, checkout: Path, tmp_path: Path) -> None:
        """PROBE_GATE_ENFORCE=1: the same change fails the job with the gate's exit 1."""
        base = git(checkout, "rev-parse", "HEAD~1").stdout.strip()
        code, summary, done = run_script(
            gate_step()["run"],
            checkout,
            tmp_path,
            PROBE_GATE_BASE=base,
            PROBE_GATE_HEAD="HEAD",
            PROBE_GATE_ENFORCE="1",
        )
        assert code == 1, done.stderr
        assert "❌ byte-probe gate closed" in summary
        assert "::error::byte-probe gate failed" in done.stdout

    def test_enforce_passes_a_current_commit_on_a_new_branch(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        """An all-zero base (a new branch) gates the head alone; a current head passes."""
        code, summary, done = run_script(
            gate_step()["run"],
            checkout,
            tmp_path,
            PROBE_GATE_BASE=ZERO,
            PROBE_GATE_HEAD="HEAD~1",
            PROBE_GATE_ENFORCE="1",
        )
        assert code == 0, done.stderr
        assert "✅ byte-probe gate passed" in summary
        assert "1 claim(s) checked" in summary


class TestGitLabJob:
    def test_it_installs_from_the_package_and_reports_junit(self) -> None:
        """pip install, no make setup; the JUnit report and the Markdown kept always."""
        job = load("gitlab-ci.yml")["byte-probe-gate"]
        assert "pip install" in job["script"][0]
        assert "make" not in " ".join(job["script"])
        assert job["artifacts"]["when"] == "always"
        assert job["artifacts"]["reports"]["junit"] == "byte-probe-gate.xml"
        assert job["variables"]["PROBE_GATE_ENFORCE"] == "0"

    def test_its_script_fails_only_when_enforced(self, checkout: Path, tmp_path: Path) -> None:
        """The stale change with the before-push sha: exit 0 report-only, 1 enforced."""
        script = load("gitlab-ci.yml")["byte-probe-gate"]["script"][1]
        before = git(checkout, "rev-parse", "HEAD~1").stdout.strip()
        env = {"CI_COMMIT_SHA": "HEAD", "CI_COMMIT_BEFORE_SHA": before}
        code, _, done = run_script(script, checkout, tmp_path, **env)
        assert code == 0, done.stderr
        assert "report-only" in done.stdout
        assert "byte-probe gate closed" in done.stdout
        code, _, done = run_script(script, checkout, tmp_path, PROBE_GATE_ENFORCE="1", **env)
        assert code == 1, done.stderr
