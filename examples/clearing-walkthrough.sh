#!/usr/bin/env bash
# The README's clearing walkthrough (docs/ARCHITECTURE.md, "Principals and clearing"): an
# agent's accepted_risk refused over MCP, the developer's own becoming a review request
# that keeps the gate closed, a self-review refused, a second person approving it, and the
# gate opening. The developer is the user running this script; the reviewer is another OS
# account (REVIEWER, default bob) that must exist and runs the CLI through `runuser`, with
# a Python 3.11 it can execute (REVIEWER_PYTHON, default /usr/bin/python3) and this
# checkout's packages. Run as root after `make setup`; it writes only in a temporary
# directory (made readable and writable for the reviewer: a demonstration, not a layout).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bp="${BYTE_PROBE:-$here/.venv/bin/byte-probe}"
reviewer="${REVIEWER:-bob}"
id "$reviewer" > /dev/null 2>&1 || { echo "no account '$reviewer': set REVIEWER" >&2; exit 2; }
me="$(id -un)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$here/examples/tinyparse" "$work/repo"
cd "$work"
mkdir state
cat > policies.json <<JSON
{"schema": 3,
 "policies": [{"id": "walk-python", "allowed_executables": ["python3"], "timeout_seconds": 30,
               "max_output_bytes": 100000, "allowed_domains": [], "environment": []}],
 "principals": {"$reviewer": "person"},
 "clearing": [{"scope": "tinyparse",
               "accepted_risk": {"users": ["$me"], "reviewers": ["$me", "$reviewer"]},
               "withdrawn": {"users": ["$me"]}}]}
JSON
chmod 644 policies.json
export BYTE_PROBE_POLICY_FILE="$work/policies.json"
unset PROBE_DATABASE_URL PROBE_REDIS_URL
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
as_reviewer() {
  runuser -u "$reviewer" -- env HOME="$work/home" BYTE_PROBE_POLICY_FILE="$BYTE_PROBE_POLICY_FILE" \
    PYTHONPATH="$here:$here/.venv/lib/python3.11/site-packages" \
    "${REVIEWER_PYTHON:-/usr/bin/python3}" -m probe_service.cli "$@"
}

s1=$("$bp" snapshot capture repo --root state --json | field "['snapshot_id']")
cat > claim.json <<JSON
{"scope": "tinyparse", "statement": "parse_list accepts a trailing comma", "kind": "behavior",
 "snapshot_id": "$s1", "dependencies": [{"exact_blob": {"path": "tinyparse.py"}}]}
JSON
"$bp" claim create claim.json --root state > /dev/null
echo "# a trailing newline" >> repo/tinyparse.py
s2=$("$bp" snapshot capture repo --root state --json | field "['snapshot_id']")
obl=$("$bp" change analyze "$s1" "$s2" --root state --json | field "['opened'][0]['obligation_id']")
mkdir -p home && chmod a+rx "$work" && chmod -R a+rwX state home

echo "## 1. the policy file's rules, as policy check prints them"
echo "\$ byte-probe policy check"
"$bp" policy check | sed -n '/^clearing/,$p'

echo "## 2. the agent accepts the risk of its own change over MCP: refused"
"$here/.venv/bin/python" - "$bp" "$work/state" "$obl" <<'PY'
import json, sys
import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

bp, root, obligation = sys.argv[1:]
async def main() -> None:
    params = StdioServerParameters(command=bp, args=["mcp", "--root", root])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        args = {"obligation_id": obligation, "resolution": "accepted_risk",
                "rationale": "only a comment changed"}
        print("> byte_obligation_resolve", json.dumps(args))
        result = await session.call_tool("byte_obligation_resolve", args)
        print("<", json.dumps({"isError": result.is_error, **(result.structured_content or {})}))
anyio.run(main)
PY

echo "## 3. the developer asks for the same on the CLI: a review request; the gate stays closed"
echo "\$ byte-probe obligations resolve $obl --resolution accepted_risk --rationale 'only a comment changed'"
"$bp" obligations resolve "$obl" --resolution accepted_risk --rationale "only a comment changed" \
  --root state
rev=$("$bp" obligations review --json --root state | field "[0]['review_id']")
echo "\$ byte-probe gate --snapshot ${s2:0:12} --scope tinyparse"
"$bp" gate --snapshot "$s2" --scope tinyparse --root state | head -3 || true

echo "## 4. approving one's own request is refused"
echo "\$ byte-probe obligations review ${rev:0:12} --approve --rationale 'fine'"
"$bp" obligations review "${rev:0:12}" --approve --rationale "fine" --root state || echo "(exit $?)"

echo "## 5. $reviewer, a listed reviewer, approves it; the gate opens"
echo "$reviewer\$ byte-probe obligations review"
as_reviewer obligations review --root state
echo "$reviewer\$ byte-probe obligations review ${rev:0:12} --approve --rationale 'read the diff: a comment'"
as_reviewer obligations review "${rev:0:12}" --approve --rationale "read the diff: a comment" \
  --root state
echo "\$ byte-probe gate --snapshot ${s2:0:12} --scope tinyparse"
"$bp" gate --snapshot "$s2" --scope tinyparse --root state | head -3
