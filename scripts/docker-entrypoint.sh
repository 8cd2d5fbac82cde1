#!/bin/sh
# The byte-probe image's entrypoint (README, "A farm on several hosts").
#
#   byte-probe-entrypoint worker …   runs `byte-probe doctor` first and starts the worker only
#                                    when every check holds; otherwise it refuses, naming the
#                                    failing checks (doctor's FAIL lines above say why and how
#                                    to fix each). A worker whose limits cannot be enforced
#                                    never joins the farm.
#   byte-probe-entrypoint ARGS …     any other command (store migrate, web, …) never needs
#                                    root: started as root, it drops to the image's
#                                    unprivileged `probe` account (uid/gid 10001) first.
set -eu

BYTE_PROBE=${BYTE_PROBE:-byte-probe}
PROBE_ACCOUNT=10001

if [ "${1:-}" = "worker" ]; then
    status=0
    report=$("$BYTE_PROBE" doctor) || status=$?
    printf '%s\n' "$report"
    if [ "$status" -ne 0 ]; then
        failed=$(printf '%s\n' "$report" | sed -n 's/^FAIL \([^:]*\):.*/\1/p' | sort -u \
            | paste -sd ',' - | sed 's/,/, /g')
        echo "byte-probe-entrypoint: refusing to start the worker: doctor failed" \
            "(exit $status): ${failed:-see its output above}" >&2
        exit "$status"
    fi
    exec "$BYTE_PROBE" "$@"
fi

if [ "$(id -u)" -eq 0 ]; then
    HOME=/home/probe exec setpriv --reuid="$PROBE_ACCOUNT" --regid="$PROBE_ACCOUNT" \
        --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "$BYTE_PROBE" "$@"
fi
exec "$BYTE_PROBE" "$@"
