"""The two stat passes of a capture: what the tree holds before reading, and after.

Inside a git work tree the first pass lists with git and ``lstat``s every path; the
second lists and ``lstat``s again. Outside git the first pass is one walk that keeps each
directory's own stat, taken before the directory is listed, and ``lstat``s each entry as
it lists it; the second pass lists again only the directories whose stat moved or is too
recent to vouch for their listing, and ``lstat``s every file and link again
(docs/ARCHITECTURE.md, "Snapshot capture"). Either way both passes see the same
membership and the same stat of every file, or the capture is unstable. Listing and
stat'ing go by path, as they always did; reading goes beneath the root's descriptor.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LimitExceeded, UnsafePath, UnstableWorkingTree
from ..relpaths import MAX_PATH_BYTES, MAX_PATH_DEPTH
from .enumerate import SKIPPED_DIRS, find_git_dir, git_paths, gitlink_commits
from .manifest import check_snapshot_path, check_snapshot_paths
from .reader import FileStat, stat_key
from .statcache import none_racy

__all__ = [
    "DIR_RACY_NS",
    "DirStat",
    "Scan",
    "check_limits",
    "first_pass",
    "require_utf8_all",
    "second_pass",
]

#: A directory whose mtime or ctime is this recent when the capture starts is listed
#: again by the second pass: an entry added in the same timestamp tick could leave its
#: stat unchanged (git's racy-timestamp rule). Never less than this, whatever the limits.
DIR_RACY_NS = 2_000_000_000

#: (inode, mtime_ns, ctime_ns, mode): adding, removing or renaming an entry moves the
#: directory's mtime and ctime, and nothing sets a ctime back.
DirStat = tuple[int, int, int, int]

#: What a directory raced into (replaced, removed, swapped for a link) answers.
_RACED = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})


@dataclass
class _Listing:
    """One directory of a walk: its stat, its files and links, the directories entered."""

    stat: DirStat
    names: list[str]
    subdirs: list[str]


@dataclass
class Scan:
    """One stat pass over the tree: files by path, link targets, gitlinks (a submodule's
    commit, inside git), and (a walk) directories."""

    stats: dict[str, FileStat]
    targets: dict[str, str]
    dirs: dict[str, _Listing] | None = field(default=None, compare=False)
    gitlinks: dict[str, str] = field(default_factory=dict)


def first_pass(abs_root: str, max_file_bytes: int, max_total_bytes: int) -> Scan:
    """List and stat the tree; refuse bad names and the limits before any byte is read.

    Raises UnsafePath (unlistable directory, non-UTF-8 or unsafe name), LimitExceeded,
    UnstableWorkingTree (a directory raced away while walked), SandboxUnavailable (no git).
    """
    if find_git_dir(Path(abs_root)):
        paths = sorted(git_paths(Path(abs_root)))
        require_utf8_all(paths)
        check_snapshot_paths(paths)
        scan = _lstat_all(abs_root, paths)
    else:
        scan = _walk(abs_root)
        require_utf8_all(list(scan.stats) + list(scan.targets))
        _check_names(scan)
    _check_limits(scan.stats, max_file_bytes, max_total_bytes)
    return scan


def second_pass(
    abs_root: str,
    first: Scan,
    start_ns: int,
    racy_window_ns: int,
    read: Collection[str] = (),
) -> Scan:
    """Stat the tree again as ``first`` saw it (a new name is instability anyway); a
    directory whose mtime or ctime lies within ``max(racy_window_ns, DIR_RACY_NS)`` of
    ``start_ns`` is listed again.

    Outside git, when every directory's stat vouches for its listing and every file of
    ``first`` is older than that window, only the files in ``read`` are ``lstat``ed again:
    the others' old ctime already proves them unchanged from before ``start_ns`` to their
    first ``lstat`` (docs/ARCHITECTURE.md, "Snapshot capture": the old-tree pass).

    Raises UnsafePath, UnstableWorkingTree (a directory moved), SandboxUnavailable.
    """
    if first.dirs is None:
        return _lstat_all(abs_root, sorted(git_paths(Path(abs_root))))
    window = max(racy_window_ns, DIR_RACY_NS)
    recent = start_ns - window
    listings: list[tuple[str, list[str]]] = []
    vouched = True
    for rel_dir, listing in first.dirs.items():
        names, held = _names_now(abs_root, rel_dir, listing, recent)
        listings.append((rel_dir, names))
        vouched = vouched and held
    if vouched and none_racy(first.stats, start_ns, window):
        return _restat_read(abs_root, first, read)
    return _restat_dirs(abs_root, listings)


def _restat_read(abs_root: str, first: Scan, read: Collection[str]) -> Scan:
    """The old-tree pass: ``first`` with the files in ``read`` ``lstat``ed again."""
    stats = dict(first.stats)
    prefix = abs_root.rstrip("/") + "/"
    for rel in read:
        try:
            st = os.lstat(prefix + rel)
        except FileNotFoundError:
            del stats[rel]  # gone: the comparison with the first pass names it
            continue
        except OSError as exc:
            raise UnsafePath(f"{rel}: cannot stat ({exc.strerror})") from exc
        if stat.S_ISREG(st.st_mode):
            stats[rel] = stat_key(st)
        else:
            del stats[rel]  # replaced by a link or a directory: named as moved
    return Scan(stats=stats, targets=dict(first.targets))


def _restat_dirs(abs_root: str, dirs: Sequence[tuple[str, list[str]]]) -> Scan:
    prefix = abs_root.rstrip("/") + "/"
    stats: dict[str, FileStat] = {}
    targets: dict[str, str] = {}
    lstat, is_reg, is_lnk = os.lstat, stat.S_ISREG, stat.S_ISLNK
    for rel_dir, names in dirs:
        base = prefix + rel_dir + "/" if rel_dir else prefix
        rel_base = rel_dir + "/" if rel_dir else ""
        for name in names:
            try:
                st = lstat(base + name)
            except FileNotFoundError:
                continue  # gone: the comparison with the first pass names it
            except OSError as exc:
                raise UnsafePath(f"{rel_base}{name}: cannot stat ({exc.strerror})") from exc
            if is_reg(st.st_mode):
                stats[rel_base + name] = stat_key(st)
            elif is_lnk(st.st_mode):
                targets[rel_base + name] = os.readlink(base + name)
    return Scan(stats=stats, targets=targets)


def _names_now(
    abs_root: str, rel_dir: str, listing: _Listing, recent_ns: int
) -> tuple[list[str], bool]:
    """The files and links of ``rel_dir`` now, and whether the directory's stat vouched
    for the first pass's (unchanged, and older than ``recent_ns``); otherwise it is listed
    again (raising if its subdirectories moved)."""
    st = _stat_dir(abs_root, rel_dir)
    if _dir_stat(st) == listing.stat and max(listing.stat[1], listing.stat[2]) < recent_ns:
        return listing.names, True
    again = _list_dir(abs_root, rel_dir, st, Scan(stats={}, targets={}))
    if sorted(again.subdirs) != sorted(listing.subdirs):
        raise UnstableWorkingTree(f"{rel_dir or '.'}: directory moved while capturing")
    return again.names, False


def _dir_stat(st: os.stat_result) -> DirStat:
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _stat_dir(abs_root: str, rel_dir: str) -> os.stat_result:
    """The stat of a directory of the walk (the root as given: a CLI root may be a link)."""
    try:
        st = os.lstat(os.path.join(abs_root, rel_dir)) if rel_dir else os.stat(abs_root)
    except OSError as exc:
        if exc.errno in _RACED:
            raise UnstableWorkingTree(f"{rel_dir}: directory moved while capturing") from exc
        raise UnsafePath(f"{rel_dir or '.'}: cannot list ({exc.strerror})") from exc
    if not stat.S_ISDIR(st.st_mode):  # swapped for a link or a file since its parent's listing
        raise UnstableWorkingTree(f"{rel_dir}: directory moved while capturing")
    return st


def _walk(abs_root: str) -> Scan:
    """Walk the tree depth first (iterative: the path bounds hold the depth,
    docs/ARCHITECTURE.md "Host-side walks")."""
    scan = Scan(stats={}, targets={}, dirs={})
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        listing = _list_dir(abs_root, rel_dir, _stat_dir(abs_root, rel_dir), scan)
        prefix = rel_dir + "/" if rel_dir else ""
        stack.extend(prefix + name for name in reversed(listing.subdirs))
    return scan


def _list_dir(abs_root: str, rel_dir: str, dir_stat: os.stat_result, scan: Scan) -> _Listing:
    """List one directory into ``scan``; ``dir_stat`` was taken before the listing, so any
    entry added after it moves the stat the second pass compares."""
    listing = _Listing(stat=_dir_stat(dir_stat), names=[], subdirs=[])
    path = os.path.join(abs_root, rel_dir) if rel_dir else abs_root
    try:
        with os.scandir(path) as entries:
            found = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    except OSError as exc:
        if exc.errno in _RACED:
            raise UnstableWorkingTree(f"{rel_dir}: directory moved while capturing") from exc
        raise UnsafePath(f"{rel_dir or '.'}: cannot list ({exc.strerror})") from exc
    rel_base = rel_dir + "/" if rel_dir else ""
    base = path.rstrip("/") + "/"
    # A name holds no "/": every entry of this directory is as deep as its first, and
    # only a name longer than what is left of the bound can make a path too long.
    deep = rel_base.count("/") >= MAX_PATH_DEPTH
    longest = MAX_PATH_BYTES - len(rel_base)
    lstat, is_reg, is_lnk = os.lstat, stat.S_ISREG, stat.S_ISLNK
    stats, names = scan.stats, listing.names
    for name, is_dir in found:
        if deep or len(name) > longest:
            check_snapshot_path(rel_base + name)  # raises: deeper or longer than allowed
        if is_dir:
            if name not in SKIPPED_DIRS:
                listing.subdirs.append(name)
            continue
        try:
            st = lstat(base + name)
        except FileNotFoundError:
            continue  # removed while listed: the second pass's listing tells
        except OSError as exc:
            raise UnsafePath(f"{rel_base}{name}: cannot stat ({exc.strerror})") from exc
        if is_reg(st.st_mode):
            stats[rel_base + name] = stat_key(st)
            names.append(name)
        elif is_lnk(st.st_mode):
            scan.targets[rel_base + name] = os.readlink(base + name)
            names.append(name)
    if scan.dirs is not None:
        scan.dirs[rel_dir] = listing
    return listing


def _lstat_all(abs_root: str, paths: Sequence[str]) -> Scan:
    """``lstat`` every listed path (a path git lists but the tree lacks is not in it); a
    listed directory is a submodule's gitlink when the index says so (its commit is
    recorded, never its files); git lists an untracked nested repository as ``name/``,
    which the name rule refused before."""
    stats: dict[str, FileStat] = {}
    targets: dict[str, str] = {}
    dirs: list[str] = []
    prefix = abs_root.rstrip("/") + "/"
    lstat, is_reg, is_lnk, is_dir = os.lstat, stat.S_ISREG, stat.S_ISLNK, stat.S_ISDIR
    for rel in paths:
        try:
            st = lstat(prefix + rel)
        except FileNotFoundError:
            continue  # tracked by git but deleted in the work tree: not part of it
        except OSError as exc:
            raise UnsafePath(f"{rel}: cannot stat ({exc.strerror})") from exc
        if is_reg(st.st_mode):
            stats[rel] = stat_key(st)
        elif is_lnk(st.st_mode):
            targets[rel] = os.readlink(prefix + rel)
            _require_utf8(targets[rel])
        elif is_dir(st.st_mode):
            dirs.append(rel)
    gitlinks = gitlink_commits(Path(abs_root), dirs)
    return Scan(stats=stats, targets=targets, gitlinks=gitlinks)


def _check_names(scan: Scan) -> None:
    """What materialize would refuse, refused now in the same words (first in order)."""
    paths = list(scan.stats) + list(scan.targets)
    try:
        check_snapshot_paths(paths)
    except UnsafePath:
        check_snapshot_paths(sorted(paths))  # the first bad path in path order, as always
        raise
    for target in scan.targets.values():
        _require_utf8(target)


def _check_limits(stats: dict[str, FileStat], max_file: int, max_total: int) -> None:
    sizes = [st[0] for st in stats.values()]
    if sizes and (max(sizes) > max_file or sum(sizes) > max_total):
        check_limits({rel: st[0] for rel, st in stats.items()}, max_file, max_total)


def check_limits(sizes_by_path: dict[str, int], max_file: int, max_total: int) -> None:
    """Refuse a file over ``max_file`` or a workspace over ``max_total`` bytes, naming
    the first path (in path order) at which the limit is passed (LimitExceeded)."""
    sizes = list(sizes_by_path.values())
    if not sizes or (max(sizes) <= max_file and sum(sizes) <= max_total):
        return
    total = 0
    for rel in sorted(sizes_by_path):
        size = sizes_by_path[rel]
        total += size
        if size > max_file:
            raise LimitExceeded(f"{rel}: {size} bytes exceeds the {max_file}-byte file limit")
        if total > max_total:
            raise LimitExceeded(f"{rel}: workspace passes the {max_total}-byte workspace limit")


def require_utf8_all(paths: list[str]) -> None:
    """Refuse a name that is not UTF-8 (UnsafePath naming it, first in path order)."""
    # One encode of everything is ~100x cheaper than one a path; only a failure looks closer.
    try:
        "\0".join(paths).encode("utf-8")
    except UnicodeEncodeError:
        for path in sorted(paths):
            _require_utf8(path)


def _require_utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UnsafePath(f"{text.encode('utf-8', 'replace')!r}: name is not UTF-8") from exc
