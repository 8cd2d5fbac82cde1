#!/usr/bin/env bash
# The README's claims walkthrough: claim -> edit -> gate fails (naming the claim, what moved
# and the command) -> that recheck command -> gate passes; then a breaking edit whose
# refuting recheck leaves the obligation open, a revert that passes the gate with no manual
# resolution, and a gate that refuses what it cannot judge.
# Runs on the embedded store in a temporary directory; needs `make setup` first.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bp="${BYTE_PROBE:-$here/.venv/bin/byte-probe}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$here/examples/tinyparse" "$work/repo"
cd "$work"
cat > policies.json <<'JSON'
{"schema": 1, "policies": [{"id": "walk-python", "allowed_executables": ["python3"],
  "timeout_seconds": 30, "max_output_bytes": 100000, "allowed_domains": [], "environment": []}]}
JSON
chmod 600 policies.json
export BYTE_PROBE_POLICY_FILE="$work/policies.json"
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

probe() {  # probe SNAPSHOT -> prints the receipt sha of its run (supports or refutes)
    cat > plan.json <<JSON
{"snapshot_id": "$1", "policy_id": "walk-python", "executable": "python3",
 "args": ["check_trailing_comma.py"], "hypothesis": "parse_list accepts a trailing comma",
 "failure_refutes": true,
 "oracle": {"check": {"kind": "exit_code", "equals": 0}, "source": "user_requirement",
            "reference": "issue #12"}}
JSON
    plan=$("$bp" plan create plan.json --json | field "['plan_id']")
    { "$bp" run "$plan" --policy walk-python --json || true; } | field "['receipt_sha256']"
}

echo "## 1. capture, probe, and record a claim resting on the receipt"
s1=$("$bp" snapshot capture repo --json | field "['snapshot_id']")
r1=$(probe "$s1")
cat > claim.json <<JSON
{"scope": "tinyparse", "statement": "parse_list accepts a trailing comma", "kind": "behavior",
 "snapshot_id": "$s1", "evidence": [{"receipt": "$r1"}],
 "dependencies": [{"exact_blob": {"path": "tinyparse.py"}},
                  {"query_set": {"query": {"kind": "grep", "pattern": "parse_list(", "domain": "**/*.py"}}}]}
JSON
"$bp" claim create claim.json
echo "## 2. the gate passes on the snapshot the claim was made on"
"$bp" gate --snapshot "$s1" --scope tinyparse

echo "## 3. someone edits the parser; the gate fails, naming the claim, what moved and the command"
sed -i 's/if items and items\[-1\] == "":/if items and not items[-1]:/' repo/tinyparse.py
s2=$("$bp" snapshot capture repo --json | field "['snapshot_id']")
code=0
"$bp" gate --snapshot "$s2" --scope tinyparse > gate.txt || code=$?
cat gate.txt
test "$code" = 1
# In CI the same report goes to the job summary as Markdown (GitHub: $GITHUB_STEP_SUMMARY).
"$bp" gate --snapshot "$s2" --scope tinyparse --format markdown \
    >> "${GITHUB_STEP_SUMMARY:-/dev/null}" || true

echo "## 4. run the command it printed: the same probe on the new snapshot resolves the obligation"
byte-probe() { "$bp" "$@"; }
next=$(sed -n 's/^  next: //p' gate.txt)
echo "\$ $next"
eval "$next" 2>/dev/null
echo "## 5. the gate passes again"
"$bp" gate --snapshot "$s2" --scope tinyparse

echo "## 6. an edit breaks the parser; its recheck refutes the claim and leaves the obligation open"
cp repo/tinyparse.py good.py
sed -i 's/items.pop()/pass/; s/ if item != ""\]/]/' repo/tinyparse.py
s3=$("$bp" snapshot capture repo --json | field "['snapshot_id']")
code=0
"$bp" recheck --snapshot "$s3" --scope tinyparse 2>/dev/null || code=$?
echo "exit $code"
test "$code" = 1

echo "## 7. the edit is reverted: the gate on the reverted snapshot passes, nothing resolved by hand"
cp good.py repo/tinyparse.py
s4=$("$bp" snapshot capture repo --json | field "['snapshot_id']")
test "$s4" = "$s2"
"$bp" gate --snapshot "$s4" --scope tinyparse

echo "## 8. the gate refuses what it cannot judge: a snapshot never captured, a misspelled scope"
never=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
for args in "--snapshot $never --scope tinyparse" "--snapshot ${s4:0:12} --scope tinyprase"; do
    code=0
    # shellcheck disable=SC2086 # the arguments are split on purpose
    "$bp" gate $args 2>&1 || code=$?
    echo "exit $code"
    test "$code" = 3
done
