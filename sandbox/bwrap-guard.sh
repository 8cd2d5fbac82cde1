#!/bin/sh
# Byte probe bubblewrap guard: the Sandbox Runtime's `bwrapPath`, so every launch -- the srt
# CLI and the persistent launcher alike -- goes through it. See docs/ARCHITECTURE.md,
# "Limits" (kernel resources). It runs nothing but bubblewrap from a fixed system
# directory, with the runtime's own arguments and, right before the command's `--`:
#
#   --remount-ro D            for every `--tmpfs D` the runtime mounted (each denied
#                             top-level directory, the hidden /sys trees): a probe can
#                             write nothing there, so scratch's limits bound every write;
#   --bind SCRATCH /dev/shm   POSIX shared memory and semaphores live in scratch, inside
#                             its byte and inode limits;
#   --tmpfs /dev/pts          read-only and empty: no pseudo-terminal is taken from
#                             kernel.pty.max, which every sandbox on the host shares;
#   --remount-ro /dev         bubblewrap's /dev tmpfs (its device nodes stay usable);
#   --add-seccomp-fd 9        our filter (probe_service/sandbox/seccomp.py), read from
#                             $BYTE_PROBE_SECCOMP_FILTER;
#   --setenv BYTE_PROBE_BWRAP_GUARD <filter>
#                             the proof the sandboxed command checks before it prints
#                             its start marker: without it, the probe never starts.
#
# Any surprise -- a missing or relative input, an option this guard does not know, no
# `--dev /dev`, no `--` -- ends with status 125 before bubblewrap starts: fail closed.
set -eu

fail() {
  printf 'bwrap-guard: %s\n' "$1" >&2
  exit 125
}

filter=${BYTE_PROBE_SECCOMP_FILTER-}
shm=${BYTE_PROBE_SHM_DIR-}
case $filter in /*) ;; *) fail "BYTE_PROBE_SECCOMP_FILTER must be an absolute path" ;; esac
case $shm in /*) ;; *) fail "BYTE_PROBE_SHM_DIR must be an absolute path" ;; esac
[ -f "$filter" ] && [ -r "$filter" ] || fail "$filter is not a readable file"
[ -d "$shm" ] || fail "$shm is not a directory"

# The same fixed directories, in the same order, as the worker's own tool lookup.
bwrap=
for dir in /usr/local/bin /usr/bin /bin /usr/local/sbin /usr/sbin /sbin; do
  if [ -f "$dir/bwrap" ] && [ -x "$dir/bwrap" ]; then
    bwrap=$dir/bwrap
    break
  fi
done
[ -n "$bwrap" ] || fail "bwrap not found in fixed system directories"

# Pass 1: walk the options by their arity up to `--`, remembering where each `--tmpfs`
# destination is -- by index only: no value is ever parsed, re-quoted or evaluated.
index=0
skip=0
next=
separator=0
tmpfs=
dev=no
for arg do
  index=$((index + 1))
  case $skip in
    2)
      skip=1
      continue
      ;;
    1)
      skip=0
      case $next:$arg in dev:/dev) dev=yes ;; esac
      next=
      continue
      ;;
  esac
  # The runtime's usual options first: dash tries the patterns in order.
  case $arg in
    --ro-bind | --bind | --setenv | --dev-bind | --ro-bind-try | --bind-try | \
      --dev-bind-try | --bind-fd | --ro-bind-fd | --file | --bind-data | --ro-bind-data | \
      --symlink | --chmod)
      skip=2
      ;;
    --tmpfs)
      skip=1
      tmpfs="$tmpfs --remount-ro \"\${$((index + 1))}\""
      ;;
    --)
      separator=$index
      break
      ;;
    --dev)
      skip=1
      next=dev
      ;;
    --unshare-all | --share-net | --unshare-user | --unshare-user-try | --unshare-ipc | \
      --unshare-pid | --unshare-net | --unshare-uts | --unshare-cgroup | \
      --unshare-cgroup-try | --disable-userns | --assert-userns-disabled | --clearenv | \
      --new-session | --die-with-parent | --as-pid-1) ;;
    --userns | --userns2 | --pidns | --uid | --gid | --hostname | --chdir | --unsetenv | \
      --lock-file | --sync-fd | --remount-ro | --exec-label | --file-label | --proc | \
      --mqueue | --dir | --block-fd | --userns-block-fd | --info-fd | \
      --json-status-fd | --cap-add | --cap-drop | --perms | --size)
      skip=1
      ;;
    *) fail "unexpected bubblewrap argument at position $index" ;;
  esac
done
[ "$separator" -gt 0 ] || fail "no -- before the command"
[ "$dev" = yes ] || fail "no --dev /dev"

# Pass 2: one `set --` of the options, ours, then `--` and the command. The list names the
# original arguments by position ("${12}"), so eval only ever sees digits and our words.
options=
index=1
while [ "$index" -lt "$separator" ]; do
  options="$options \"\${$index}\""
  index=$((index + 1))
done
command=
while [ "$index" -le "$#" ]; do
  command="$command \"\${$index}\""
  index=$((index + 1))
done
eval "set -- $options $tmpfs"' --bind "$shm" /dev/shm --tmpfs /dev/pts --remount-ro /dev/pts \
  --remount-ro /dev --add-seccomp-fd 9 --setenv BYTE_PROBE_BWRAP_GUARD "$filter" '"$command"
exec "$bwrap" "$@" 9<"$filter"
