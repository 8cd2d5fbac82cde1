#!/usr/bin/env bash
# The README's TypeScript boundary walkthrough: a claim about every caller of chargeCard
# rests on the compiler boundary; a new caller in a new file, reached through the barrel
# re-export `export { chargeCard as pay }`, reopens it although no cited line changed and
# the name chargeCard appears nowhere in it, while an unrelated edit does not (the
# compiler is not even rerun).
# Runs on the embedded store in a temporary directory; needs `make setup` first.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bp="${BYTE_PROBE:-$here/.venv/bin/byte-probe}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$here/examples/tsshop" "$work/repo"
cd "$work"
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

echo "## 1. capture, and ask the compiler worker for the boundary of chargeCard"
s1=$("$bp" snapshot capture repo --json | field "['snapshot_id']")
"$bp" ts boundary --snapshot "$s1" --symbol chargeCard --file src/payments.ts

echo "## 2. record the claim: cited line, the file, and the boundary"
start=$(python3 -c "print(open('repo/src/checkout.ts','rb').read().index(b'chargeCard(totalCents)'))")
cat > claim.json <<JSON
{"scope": "shop", "statement": "every caller of chargeCard checks the result", "kind": "behavior",
 "snapshot_id": "$s1",
 "evidence": [{"span": {"path": "src/checkout.ts", "start": $start, "end": $((start + 22))}}],
 "dependencies": [{"exact_blob": {"path": "src/checkout.ts"}},
                  {"query_set": {"query": {"kind": "typescript_boundary", "symbol": "chargeCard",
                                           "file": "src/payments.ts"}}}]}
JSON
"$bp" claim create claim.json
"$bp" gate --snapshot "$s1" --scope shop

echo "## 3. an unrelated edit: TypeScript inputs unchanged, compiler skipped, gate passes"
printf '# Shop\n\nNow with gift cards.\n' > repo/README.md
s2=$("$bp" snapshot capture repo --json | field "['snapshot_id']")
"$bp" gate --snapshot "$s2" --scope shop

echo "## 4. another agent adds a caller through the barrel's alias; no cited line changed, the claim reopens"
cat > repo/src/refund.ts <<'TS'
import { pay } from "./index";

export function refund(totalCents: number): void {
  pay(-totalCents); // result ignored
}
TS
s3=$("$bp" snapshot capture repo --json | field "['snapshot_id']")
if "$bp" gate --snapshot "$s3" --scope shop; then
    echo "gate unexpectedly passed" >&2; exit 1
fi
"$bp" obligations list --open --json \
    | python3 -c "import json,sys; [print(o['state'], o['applicability'], *o['reasons'], sep=' | ') for o in json.load(sys.stdin)]"
