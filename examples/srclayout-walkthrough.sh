#!/usr/bin/env bash
# The README's plan_environment walkthrough: a src-layout suite (examples/srclayout) runs as a
# probe only when its plan sets PYTHONPATH=src, a name its schema-3 policy lets a plan set;
# the policy fixes LANG and PATH, so the run does not depend on the worker or face.
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

echo "## 1. a toolchain with pytest, and a schema-3 policy: fixed values, one plan name"
echo "pytest==8.3.3" > requirements.txt
toolchain="${TOOLCHAIN_DEST:-$tools/py311-pytest}"
"$bp" toolchain create py311-pytest --python /usr/bin/python3.11 \
    --requirements requirements.txt --dest "$toolchain" > /dev/null
cat > policies.json <<JSON
{"schema": 3, "policies": [{"id": "python-src", "allowed_executables": ["python3"],
  "toolchains": {"py311-pytest": "$toolchain"},
  "executable_pins": {"python3": "$toolchain/bin/python"},
  "timeout_seconds": 120, "max_output_bytes": 1000000, "allowed_domains": [],
  "environment": {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
  "plan_environment": ["PYTHONPATH"]}]}
JSON
chmod 600 policies.json
export BYTE_PROBE_POLICY_FILE="$work/policies.json"
"$bp" policy check --json | field "['policies'][0]['warnings']"
"$bp" policy describe python-src --json | field "['environment']"

echo "## 2. capture the src-layout project"
cp -r "$here/examples/srclayout" repo
snap=$("$bp" snapshot capture repo --json | field "['snapshot_id']")

plan() {  # plan HYPOTHESIS ENVIRONMENT_JSON -> a plan: import check first, then the suite
    printf '{"hypothesis": "%s", "snapshot_id": "%s", "policy_id": "python-src", "executable": "python3", "args": ["-m", "pytest", "-q", "--junitxml=$BYTE_PROBE_SCRATCH/report.xml"], "environment": %s, "preflight": [["python3", "-c", "import tinyver"]], "failure_refutes": true, "oracle": {"check": {"kind": "junit_xml", "require": []}, "source": "user_requirement", "reference": "tinyver docstrings"}}\n' "$1" "$snap" "$2"
}

echo "## 3. the plan sets PYTHONPATH=src: the suite imports src/tinyver and supports"
plan "the tinyver suite passes" '{"PYTHONPATH": "src"}' > with.json
with=$("$bp" plan create with.json --json | field "['plan_id']")
"$bp" run "$with" --policy python-src

echo "## 4. without it, the import check fails first: inconclusive, never a refutation"
plan "the tinyver suite passes" '{}' > without.json
without=$("$bp" plan create without.json --json | field "['plan_id']")
code=0; "$bp" run "$without" --policy python-src --json > without-run.json || code=$?
python3 -c "import json; d=json.load(open('without-run.json')); print(d['outcome'], d['reason'], '-', d['detail'])"
echo "run exit code: $code (2 = inconclusive)"

echo "## 5. a name the policy does not list, or a loader name, is refused at plan time"
plan "the suite, with a preload" '{"LD_PRELOAD": "/tmp/x.so"}' > preload.json
"$bp" plan create preload.json || true
plan "the suite, with addopts" '{"PYTEST_ADDOPTS": "-x"}' > addopts.json
"$bp" plan create addopts.json || true

echo "## 6. again from another shell environment: the same action, reused"
env LANG=de_DE.UTF-8 PATH="/usr/local/bin:$PATH" "$bp" run "$with" --policy python-src --json \
    | python3 -c "import json,sys; d=json.load(sys.stdin); print('reused:', d['reused'], '-', d['reuse']['detail'])"
