"""Write what a release's faces answer for stored receipts, as JSON text, for the fixtures.

Run by the release's own interpreter over a receipts fixture directory written by
``scripts/release_fixtures.py``:

    /tmp/rel-84f3b46/.venv/bin/python scripts/release_faces.py \
        tests/fixtures/receipts/84f3b46-sqlite

Each receipt body is stored as it is into a fresh embedded store, then ``faces.json`` gets,
per receipt name, the JSON text the operation table dumps for ``receipt_get`` and for the
``probe_run`` result of that receipt (``result_from_receipt``): what every face returns.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from probe_service import plans
from probe_service.service import ProbeService
from probe_service.service.registry import operations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("receipts", type=Path)
    args = parser.parse_args()
    ops = {op.name: op for op in operations()}
    bodies = {
        path.name.removesuffix(".json"): path.read_text(encoding="utf-8")
        for path in sorted(args.receipts.glob("*.json"))
        if path.name != "manifest.json" and not path.name.endswith((".envelope.json", "faces.json"))
    }
    faces: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as root, ProbeService.open(Path(root)) as svc:
        for name, body in bodies.items():
            receipt = json.loads(body)
            plans.save_receipt(svc.store, f"run-{name}", receipt, False)
        for name, body in bodies.items():
            sha = json.loads(body)["receipt_sha256"]
            shown = svc.receipt_get(receipt_id=sha)
            result = plans.result_from_receipt(f"run-{name}", plans.load_receipt(svc.store, sha))
            faces[name] = {
                "receipt_get": json.dumps(ops["receipt_get"].dump(shown)),
                "probe_run": json.dumps(ops["probe_run"].dump(result)),
            }
    out = args.receipts / "faces.json"
    out.write_text(json.dumps(faces, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
