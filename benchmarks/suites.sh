#!/usr/bin/env bash
# Three real open-source Python test suites as probes: the measurement behind the README's
# "Sizing a real suite" figures, reproducible from a clean machine.
#
# Downloads the pinned sdists with pip (their tests are in them), builds one toolchain with
# pinned pytest and the suites' test dependencies, writes a schema-3 policy, captures each
# unpacked sdist as a snapshot and runs its whole suite as a probe with the junit_xml oracle,
# `byte-probe run` in this process (embedded store, no queue). Then `packaging` once more on a
# copy with one source line edited (`>=` compares as `>`), so its run shows failing tests.
# Beside each probe, the same pytest on a copy outside the sandbox (as root, same toolchain
# and environment): the baseline from the same run. Prints one table row per run and writes
# the figures as JSON (SUITES_OUT, default
# benchmarks/results/suites.json). Not part of `make test`.
#
# Needs `make setup` first, root (probes run as uids 61000+) and pip access to a package
# index; the probes themselves have no network. Knobs: SUITES_MEMORY_BYTES (the policy's
# memory_bytes, default 2 GiB), SUITES_TIMEOUT (timeout_seconds, default 900), BYTE_PROBE,
# SUITES_KEEP=1 (keep the work directory and the toolchain).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bp="${BYTE_PROBE:-$here/.venv/bin/byte-probe}"
py="$here/.venv/bin/python"
out="${SUITES_OUT:-$here/benchmarks/results/suites.json}"
work="$(mktemp -d)"         # the embedded store (.zyte), the sdists, plans and outputs
tools="$(mktemp -d)"        # the toolchain lives outside every repository and the store
if [ -z "${SUITES_KEEP:-}" ]; then trap 'rm -rf "$work" "$tools"' EXIT; else echo "keeping $work $tools"; fi
chmod 755 "$tools"          # the probe uids must reach the toolchain below it
cd "$work"

# The suites, pinned: name, version, the directory its package imports from, the module.
SUITES=(
    "packaging 24.2 src packaging"
    "attrs 24.2.0 src attr"
    "more-itertools 10.5.0 . more_itertools"
)
# pytest and what the suites' tests import (packaging: pretend; attrs: hypothesis, pympler,
# cloudpickle). attrs' mypy and pyright tests need tools not installed: they are skipped.
cat > requirements.txt <<'REQ'
pytest==8.3.3
pretend==1.0.9
hypothesis==6.112.1
pympler==1.1
cloudpickle==3.0.0
REQ

echo "## 1. the sdists, with pip (outside the sandbox; the probes get no network)"
mkdir sdists
for suite in "${SUITES[@]}"; do
    read -r name version _ _ <<<"$suite"
    "$py" -m pip download --quiet --no-binary :all: --no-deps --dest sdists "$name==$version"
done
for archive in sdists/*.tar.gz; do tar -xzf "$archive" -C sdists; done

echo "## 2. one toolchain: pytest and the suites' test dependencies, pinned"
toolchain="$tools/py311-suites"
"$bp" toolchain create py311-suites --python /usr/bin/python3.11 \
    --requirements requirements.txt --dest "$toolchain" > /dev/null

echo "## 3. a schema-3 policy: fixed environment, PYTHONPATH from the plan, no network"
cat > policies.json <<JSON
{"schema": 3, "policies": [{"id": "suites", "allowed_executables": ["python3"],
  "toolchains": {"py311-suites": "$toolchain"},
  "executable_pins": {"python3": "$toolchain/bin/python"},
  "timeout_seconds": ${SUITES_TIMEOUT:-900}, "max_output_bytes": 4000000,
  "memory_bytes": ${SUITES_MEMORY_BYTES:-2147483648}, "allowed_domains": [],
  "environment": {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
  "plan_environment": ["PYTHONPATH"]}]}
JSON
chmod 600 policies.json
export BYTE_PROBE_POLICY_FILE="$work/policies.json"
"$bp" policy check > /dev/null

# The probe: pytest over the whole suite writing JUnit into scratch, then the report's size
# (scratch goes with the run, so the probe says it), pytest's exit code kept.
PROBE='import os, subprocess, sys
code = subprocess.call([sys.executable, "-m", "pytest", *sys.argv[1:]])
report = os.path.join(os.environ["BYTE_PROBE_SCRATCH"], "report.xml")
print("report.xml", os.path.getsize(report) if os.path.exists(report) else 0, "bytes")
sys.exit(code)'

plan() {  # plan NAME SNAPSHOT PYTHONPATH MODULE -> plan.json
    python3 - "$@" "$PROBE" > plan.json <<'PY'
import json, sys
name, snapshot, path, module, probe = sys.argv[1:]
print(json.dumps({
    "hypothesis": f"the {name} suite passes", "snapshot_id": snapshot, "policy_id": "suites",
    "executable": "python3",
    "args": ["-c", probe, "-q", "-p", "no:cacheprovider",
             "--junitxml=$BYTE_PROBE_SCRATCH/report.xml"],
    "environment": {"PYTHONPATH": path},
    "preflight": [["python3", "-c", f"import pytest, {module}"]],
    "failure_refutes": True,
    "oracle": {"check": {"kind": "junit_xml", "require": []},
               "source": "user_requirement", "reference": f"{name}'s own test suite"}}))
PY
}

baseline() {  # baseline DIR PYTHONPATH -> baseline.json: the same pytest, no sandbox
    rm -rf baseline-copy && cp -r "$1" baseline-copy
    (cd baseline-copy && env -i LANG=C.UTF-8 PATH=/usr/bin:/bin HOME="$work" \
        PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$2" "$toolchain/bin/python" -c '
import json, resource, subprocess, sys, time
start = time.monotonic()
code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--junitxml=../baseline-report.xml"], stdout=subprocess.DEVNULL)
took = time.monotonic() - start
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"baseline_seconds": round(took, 2), "baseline_exit_code": code,
                  "baseline_max_rss_bytes": rss}))' > ../baseline.json)
    rm -rf baseline-copy baseline-report.xml
}

measure() {  # measure NAME VERSION DIR PYTHONPATH MODULE [plain] -> a JSON line in runs.jsonl
    local snap plan_id start end code=0
    snap=$("$bp" snapshot capture "$3" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot_id"])')
    # The baseline first, on a copy (pytest and hypothesis write beside the tests), as root.
    baseline "$3" "$4"
    plan "$1" "$snap" "$4" "$5"
    plan_id=$("$bp" plan create plan.json --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["plan_id"])')
    start=$(date +%s.%N)
    if [ "${6:-}" = plain ]; then  # the person's output (a pipe, so the table is plain)
        echo "\$ byte-probe run ${plan_id:0:8} --policy suites --no-reuse | cat"
        "$bp" run "$plan_id" --policy suites --no-reuse > run.txt || code=$?
        end=$(date +%s.%N)
        cat run.txt
        echo "\$ echo \$?"; echo "$code"
        receipt=$(awk '$1 == "receipt" {print $2; exit}' run.txt)
    else
        "$bp" run "$plan_id" --policy suites --no-reuse --json > run.json || code=$?
        end=$(date +%s.%N)
        receipt=$(python3 -c 'import json; print(json.load(open("run.json"))["receipt_sha256"])')
    fi
    # The receipt itself: its summary, and the operational part (both executions' peaks).
    "$bp" receipt show "${receipt:0:12}" --json > run.json
    python3 - "$1" "$2" "$start" "$end" "$code" run.json >> runs.jsonl <<'PY'
import base64, json, re, sys
name, version, start, end, code, path = sys.argv[1:]
run = json.load(open(path))
junit = run.get("junit") or {}
operational = run["operational"]
stdout = base64.b64decode(operational.get("stdout_b64", "")).decode(errors="replace")
size = re.search(r"report.xml (\d+) bytes", stdout)
second = operational.get("confirmation") or {}
print(json.dumps({
    "suite": name, "version": version, "outcome": run["outcome"], "reason": run["reason"],
    "exit_code": int(code), "cases": junit.get("tests"), "failed": junit.get("failed"),
    "report_bytes": int(size.group(1)) if size else None,
    "cli_wall_seconds": round(float(end) - float(start), 2),
    "execute_seconds": run["phases"].get("execute"),
    "evaluate_seconds": run["phases"].get("evaluate"),
    "memory_peak_bytes": run.get("memory_peak_bytes"),
    "confirm_memory_peak_bytes": second.get("memory_peak_bytes"),
    "confirm_execute_seconds": (second.get("phases") or {}).get("execute"),
    "memory_bytes": (run.get("limits_applied") or {}).get("memory_bytes"),
    "detail": run.get("detail") or (run.get("check") or {}).get("detail"),
    **json.load(open("baseline.json")),
}))
PY
    tail -n 1 runs.jsonl
}

echo "## 4. each suite as one probe (run --no-reuse, this process, one at a time)"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
: > runs.jsonl
for suite in "${SUITES[@]}"; do
    read -r name version path module <<<"$suite"
    measure "$name" "$version" "sdists/$name-$version" "$path" "$module"
done

echo "## 5. packaging with one line edited (>= compares as >): its failing tests"
cp -r sdists/packaging-24.2 packaging-edited
sed -i 's/return Version(prospective.public) >= Version(spec)/return Version(prospective.public) > Version(spec)/' \
    packaging-edited/src/packaging/specifiers.py
grep -q 'Version(prospective.public) > Version(spec)' packaging-edited/src/packaging/specifiers.py
measure packaging 24.2+edit packaging-edited src packaging plain

echo "## 6. the figures"
mkdir -p "$(dirname "$out")"
python3 - runs.jsonl "$out" "$("$toolchain/bin/python" --version)" "$load_before" <<'PY'
import json, os, sys, time
runs = [json.loads(line) for line in open(sys.argv[1])]
machine = {"cpus": os.cpu_count(), "load_average_before": sys.argv[4].split(),
           "load_average_after": [round(x, 2) for x in os.getloadavg()],
           "toolchain_python": sys.argv[3], "pytest": "8.3.3",
           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
json.dump({"machine": machine, "runs": runs}, open(sys.argv[2], "w"), indent=2)
mib = 1024 * 1024
print("| suite | version | cases | report | byte-probe run wall | probe execute | memory peak "
      "| no sandbox: pytest wall, max RSS | outcome |")
print("|---|---|---|---|---|---|---|---|---|")
for r in runs:
    report = f"{r['report_bytes'] / 1e6:.1f} MB" if r["report_bytes"] else "-"
    peak = f"{r['memory_peak_bytes'] / mib:.0f} MiB" if r["memory_peak_bytes"] else "-"
    cases = f"{r['cases']:,}" if r["cases"] is not None else "-"
    print(f"| {r['suite']} | {r['version']} | {cases} | {report} | {r['cli_wall_seconds']:.1f} s "
          f"| {r['execute_seconds'] or 0:.1f} s | {peak} "
          f"| {r['baseline_seconds']:.1f} s, {r['baseline_max_rss_bytes'] / mib:.0f} MiB "
          f"| {r['outcome']} |")
print(f"load average {machine['load_average_before']} before, "
      f"{machine['load_average_after']} after, on {machine['cpus']} CPUs")
PY
