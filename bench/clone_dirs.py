#!/usr/bin/env python3
"""Benchmark of ``[worktree] clone_dirs`` (issue 28): a 200 MB ignored directory (node_modules-like: many
files of 100 KB) brought into a new worktree by git-nerve's clone (copy-on-write where the filesystem
can: `cp --reflink=auto -a` on Linux, `cp -c` on macOS) against a plain copy (shutil.copytree), side by
side in one run. Prints figures; asserts nothing.

Whether the filesystem clones at all is probed first (`cp --reflink=always` / `cp -c` on one file): on
one that cannot (ext4, tmpfs), the clone falls back to a copy and the two figures are two copies.

Run from the repository root:  .venv/bin/python bench/clone_dirs.py [--mb 200] [--rounds 2]
(the directory is made under $TMPDIR: point TMPDIR at a btrfs/XFS/APFS volume to see clones).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "nerve-bench-clone-"


def make_tree(src: Path, mb: int, file_kb: int = 100) -> int:
    count = mb * 1024 // file_kb
    for i in range(count):
        d = src / f"pkg{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.bin").write_bytes(os.urandom(file_kb * 1024))
    return count


def clones_here(tmp: Path) -> bool:
    probe = tmp / "probe"
    probe.write_bytes(os.urandom(65536))
    argv = ["cp", "-c", str(probe), str(tmp / "probe-clone")] if sys.platform == "darwin" else \
        ["cp", "--reflink=always", str(probe), str(tmp / "probe-clone")]
    return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def fs_type(path: Path) -> str:
    out = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True).stdout.splitlines()
    return out[-1].split()[1] if sys.platform.startswith("linux") and len(out) > 1 else "?"


def used_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def timed(fn, src: Path, dst: Path, tmp: Path) -> tuple[float, int]:
    subprocess.run(["sync"])
    before = used_bytes(tmp)
    t0 = time.perf_counter()
    fn(src, dst)
    subprocess.run(["sync"])
    return time.perf_counter() - t0, used_bytes(tmp) - before


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from git_nerve.git import destroy
    from git_nerve.worktree_prep.clone import clone_tree, plain_copy

    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix=PREFIX))
    try:
        cow = clones_here(tmp)
        files = make_tree(tmp / "src", args.mb)
        print(f"{args.mb} MB in {files} files under {tmp} ({fs_type(tmp)}); copy-on-write clones here: "
              f"{'yes' if cow else 'NO (the clone falls back to a plain copy: both rows are copies)'}")
        rows: dict[str, list[tuple[float, int]]] = {"clone (git-nerve clone_dirs)": [], "plain copy (copytree)": []}
        for r in range(args.rounds):
            rows["clone (git-nerve clone_dirs)"].append(timed(clone_tree, tmp / "src", tmp / f"clone{r}", tmp))
            rows["plain copy (copytree)"].append(timed(plain_copy, tmp / "src", tmp / f"copy{r}", tmp))
        for name, runs in rows.items():
            secs = statistics.median(t for t, _ in runs)
            space = statistics.median(b for _, b in runs)
            print(f"  {name:<30} {secs:6.2f} s (median of {len(runs)})   new space used: {space / 2**20:7.1f} MB")
        c = statistics.median(t for t, _ in rows["clone (git-nerve clone_dirs)"])
        p = statistics.median(t for t, _ in rows["plain copy (copytree)"])
        print(f"  clone / plain copy time: {c / p:.2f}")
    finally:
        destroy.remove_own_tempdir(tmp, prefix=PREFIX)


if __name__ == "__main__":
    main()
