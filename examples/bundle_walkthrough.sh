#!/usr/bin/env bash
# The README's bundle walkthrough: a claim made on a laptop's embedded (SQLite) store, with
# a signed receipt from the real sandbox, carried in one file to a farm's store
# (PostgreSQL when PROBE_FARM_DATABASE_URL names one, else a second SQLite store),
# verified without a store, imported, and gated there; a second import writes nothing.
# Needs `make setup` first.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bp="${BYTE_PROBE:-$here/.venv/bin/byte-probe}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$here/examples/tinyparse" "$work/repo"
cd "$work"
mkdir laptop farm
cat > policies.json <<'JSON'
{"schema": 1, "policies": [{"id": "walk-python", "allowed_executables": ["python3"],
  "timeout_seconds": 30, "max_output_bytes": 100000, "allowed_domains": [], "environment": []}]}
JSON
chmod 600 policies.json
export BYTE_PROBE_POLICY_FILE="$work/policies.json"
unset PROBE_DATABASE_URL PROBE_REDIS_URL
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
farm() { PROBE_DATABASE_URL="${PROBE_FARM_DATABASE_URL:-}" "$bp" "$@" --root farm; }

echo "## 1. on the laptop: a signing key, a signed run, a claim resting on it"
"$bp" key create --out keys > /dev/null
export BYTE_PROBE_SIGNING_KEY="$work/keys/signing-key.pem"
s1=$("$bp" snapshot capture repo --root laptop --json | field "['snapshot_id']")
cat > plan.json <<JSON
{"snapshot_id": "$s1", "policy_id": "walk-python", "executable": "python3",
 "args": ["check_trailing_comma.py"], "hypothesis": "parse_list accepts a trailing comma",
 "failure_refutes": true,
 "oracle": {"check": {"kind": "exit_code", "equals": 0}, "source": "user_requirement",
            "reference": "issue #12"}}
JSON
plan=$("$bp" plan create plan.json --root laptop --json | field "['plan_id']")
r1=$("$bp" run "$plan" --policy walk-python --root laptop --json | field "['receipt_sha256']")
cat > claim.json <<JSON
{"scope": "tinyparse", "statement": "parse_list accepts a trailing comma", "kind": "behavior",
 "snapshot_id": "$s1", "evidence": [{"receipt": "$r1"}],
 "dependencies": [{"exact_blob": {"path": "tinyparse.py"}}]}
JSON
"$bp" claim create claim.json --root laptop > /dev/null
"$bp" gate --snapshot "$s1" --scope tinyparse --root laptop
unset BYTE_PROBE_SIGNING_KEY

echo "## 2. export the scope into one file"
echo "\$ byte-probe bundle export --scope tinyparse --out tinyparse.bundle"
"$bp" bundle export --scope tinyparse --out tinyparse.bundle --root laptop

echo "## 3. anyone checks it without a store; the key proves who ran the probe"
echo "\$ byte-probe bundle verify tinyparse.bundle --key keys/signing-key.pub.pem"
"$bp" bundle verify tinyparse.bundle --key keys/signing-key.pub.pem

echo "## 4. the farm imports it, requiring that key; importing twice writes nothing"
echo "\$ byte-probe bundle import tinyparse.bundle --require-signed keys/signing-key.pub.pem"
farm bundle import tinyparse.bundle --require-signed keys/signing-key.pub.pem
farm bundle import tinyparse.bundle --require-signed keys/signing-key.pub.pem

echo "## 5. the farm's gate gives the laptop's verdict, requiring the same key"
farm gate --snapshot "$s1" --scope tinyparse --require-signed keys/signing-key.pub.pem

echo "## 6. an edit captured on the farm opens the same obligation there"
sed -i 's/if items and items\[-1\] == "":/if items and not items[-1]:/' repo/tinyparse.py
s2=$(farm snapshot capture repo --json | field "['snapshot_id']")
code=0
farm gate --snapshot "$s2" --scope tinyparse > gate.txt || code=$?
head -n 2 gate.txt
echo "exit $code"
test "$code" = 1

echo "## 7. a tampered bundle is refused, naming the object; nothing is written"
"$here/.venv/bin/python" - <<'PY'
import io, tarfile, zstandard
raw = zstandard.ZstdDecompressor().stream_reader(open("tinyparse.bundle", "rb")).read()
src = tarfile.open(fileobj=io.BytesIO(raw))
out = io.BytesIO()
with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
    for m in src:
        data = src.extractfile(m).read()
        if m.name.startswith("blob/") and not getattr(src, "done", False):
            data, src.done = b"#" + data[1:], True
        dst.addfile(m, io.BytesIO(data))
open("tampered.bundle", "wb").write(zstandard.ZstdCompressor().compress(out.getvalue()))
PY
code=0
"$bp" bundle verify tampered.bundle 2>&1 || code=$?
echo "exit $code"
test "$code" = 3
