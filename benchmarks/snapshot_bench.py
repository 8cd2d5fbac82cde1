"""Snapshot benchmark: capture, recapture and materialize against tar baselines, same run.

Builds ~10,000 files / ~200 MB of mixed sizes and compressibility, then prints medians
and the ratios the foundation issue sets goals for:
  cold capture throughput vs `tar -cf - . | zstd -1`   (goal >= 1.0x)
  unchanged recapture time vs cold capture time          (goal <= 10%)
  materialize throughput vs `tar -x` of the same content (goal >= 1.0x)
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_note, median_seconds

from probe_service.snapshot import snapshot_capture, snapshot_materialize
from probe_service.store import open_store

FILES = 10_000
REPEAT = 3


def build_tree(root: Path) -> int:
    """Write the synthetic tree; return its total size in bytes."""
    rng = random.Random(7)
    words = [bytes(rng.choice(b"abcdefghijklmnop ") for _ in range(8)) for _ in range(500)]
    total = 0
    for i in range(FILES):
        directory = root / f"pkg{i % 50:02d}" / f"mod{i % 7}"
        directory.mkdir(parents=True, exist_ok=True)
        roll = rng.random()
        size = 4_000 if roll < 0.80 else 40_000 if roll < 0.99 else 1_000_000
        if i % 2:
            data = rng.randbytes(size)  # incompressible
        else:
            data = b" ".join(rng.choice(words) for _ in range(size // 9))[:size]
        (directory / f"f{i}.dat").write_bytes(data)
        total += len(data)
    return total


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="snapbench-"))
    try:
        tree = base / "tree"
        tree.mkdir()
        total = build_tree(tree)
        time.sleep(2.5)  # leave the racy window so the stat cache may trust these files
        print(f"tree: {FILES} files, {total / 1e6:.0f} MB; machine: {machine_note()}")

        tar_zstd = median_seconds(
            lambda: subprocess.run(
                "tar -cf - . | zstd -1 -q -c > /dev/null",
                shell=True,
                cwd=tree,
                check=True,
            ),
            REPEAT,
        )
        stores: list[Path] = []

        def fresh_store() -> None:
            stores.append(Path(tempfile.mkdtemp(dir=base)))

        cold = median_seconds(
            lambda: snapshot_capture(open_store(stores[-1]), tree), REPEAT, fresh_store
        )
        store = open_store(stores[-1])
        snapshot_id = snapshot_capture(store, tree).snapshot_id
        warm = median_seconds(lambda: snapshot_capture(store, tree), REPEAT)

        tar_file = base / "tree.tar"
        subprocess.run(["tar", "-cf", str(tar_file), "."], cwd=tree, check=True)
        outs: list[Path] = []

        def fresh_out() -> None:
            if outs:
                shutil.rmtree(outs[-1])
            outs.append(Path(tempfile.mkdtemp(dir=base)) / "o")

        def untar() -> None:
            outs[-1].mkdir()
            subprocess.run(["tar", "-xf", str(tar_file)], cwd=outs[-1], check=True)

        tar_x = median_seconds(untar, REPEAT, fresh_out)
        materialize = median_seconds(
            lambda: snapshot_materialize(store, snapshot_id, outs[-1]), REPEAT, fresh_out
        )

        mb = total / 1e6
        print(f"tar | zstd -1        {tar_zstd:7.3f} s  {mb / tar_zstd:7.1f} MB/s")
        print(f"cold capture         {cold:7.3f} s  {mb / cold:7.1f} MB/s")
        print(f"unchanged recapture  {warm:7.3f} s")
        print(f"tar -x               {tar_x:7.3f} s  {mb / tar_x:7.1f} MB/s")
        print(f"materialize          {materialize:7.3f} s  {mb / materialize:7.1f} MB/s")
        print(f"ratio cold capture / tar|zstd throughput : {tar_zstd / cold:5.2f}x (goal >= 1.0x)")
        print(f"ratio recapture / cold capture time      : {warm / cold:6.1%} (goal <= 10%)")
        print(
            f"ratio materialize / tar -x throughput    : {tar_x / materialize:5.2f}x (goal >= 1.0x)"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
