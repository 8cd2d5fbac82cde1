#!/usr/bin/env bash
# The README's toolchain walkthrough: build a toolchain with pytest, capture examples/pysuite,
# run its suite as a probe (a passing subset supports, the whole suite refutes), then in bulk
# with `submit --junit`, and show the JUnit every test of every probe lands in.
# Runs on the embedded store in a temporary directory; needs `make setup` first and pip access
# to a package index. Run as root, like a worker (probes run as uids 61000+).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bp="${BYTE_PROBE:-$here/.venv/bin/byte-probe}"
work="$(mktemp -d)"         # the embedded store lives here (.zyte)
tools="$(mktemp -d)"        # toolchains live outside every repository and the store
trap 'rm -rf "$work" "$tools"' EXIT
chmod 755 "$tools"          # the probe uids must reach the toolchain below it
cd "$work"
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

echo "## 1. build a toolchain: a virtualenv with pytest (administrator, CLI only)"
echo "pytest==8.3.3" > requirements.txt
toolchain="${TOOLCHAIN_DEST:-$tools/py311-pytest}"   # e.g. /opt/byte-probe/toolchains/...
"$bp" toolchain create py311-pytest --python /usr/bin/python3.11 \
    --requirements requirements.txt --dest "$toolchain"

echo "## 2. a policy that grants it (read + execute, never write) and pins its python"
cat > policies.json <<JSON
{"schema": 2, "policies": [{"id": "python-tests", "allowed_executables": ["python3"],
  "toolchains": {"py311-pytest": "$toolchain"},
  "executable_pins": {"python3": "$toolchain/bin/python"},
  "timeout_seconds": 120, "max_output_bytes": 1000000, "allowed_domains": [],
  "environment": ["LANG"]}]}
JSON
chmod 600 policies.json
export BYTE_PROBE_POLICY_FILE="$work/policies.json"
"$bp" policy check

echo "## 3. capture the example project (a passing and a failing test)"
cp -r "$here/examples/pysuite" repo
snap=$("$bp" snapshot capture repo --json | field "['snapshot_id']")

plan() {  # plan HYPOTHESIS REQUIRE_JSON -> one plan line: pytest writes JUnit into scratch
    printf '{"hypothesis": "%s", "snapshot_id": "%s", "policy_id": "python-tests", "executable": "python3", "args": ["-m", "pytest", "-q", "--junitxml=$BYTE_PROBE_SCRATCH/report.xml"], "preflight": [["python3", "-c", "import pytest"]], "failure_refutes": true, "oracle": {"check": {"kind": "junit_xml", "require": %s}, "source": "user_requirement", "reference": "calc.py docstrings"}}\n' "$1" "$snap" "$2"
}

echo "## 4. the suite as one probe: test_add alone supports"
plan "test_add passes" '["tests.test_calc::test_add"]' > add.json
add=$("$bp" plan create add.json --json | field "['plan_id']")
"$bp" run "$add" --policy python-tests

echo "## 5. the whole suite refutes: safe_divide(1, 0) raises"
plan "the calc suite passes" '[]' > whole.json
whole=$("$bp" plan create whole.json --json | field "['plan_id']")
code=0; "$bp" run "$whole" --policy python-tests || code=$?
echo "run exit code: $code (1 = refutes)"

echo "## 6. in bulk: both plans, one JUnit with every test of every probe"
plan "test_add passes" '["tests.test_calc::test_add"]' > plans.jsonl
plan "the calc suite passes" '[]' >> plans.jsonl
"$bp" submit plans.jsonl --policy python-tests --no-reuse --wait --junit probes.xml || true
python3 - probes.xml <<'PY'
import sys
import xml.etree.ElementTree as ET
for suite in ET.parse(sys.argv[1]).getroot():
    print(f"testsuite {suite.get('name')!r}: tests={suite.get('tests')} failures={suite.get('failures')}")
    for case in suite.findall("testcase"):
        failed = case.find("failure")
        verdict = "FAILED " + failed.get("message", "") if failed is not None else "passed"
        print(f"  {case.get('classname')} {case.get('name')} {case.get('time')}s {verdict}")
PY
