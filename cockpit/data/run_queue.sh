#!/usr/bin/env bash
# run_queue.sh — run a queue of sweep cells sequentially (platform-facts §6.2).
#
# The cockpit's own queue runner: `cockpit launch` deploys it (versioned by content) and the
# demo fleet runs it. It writes exactly the master-log lines the cockpit reads.
#
# Usage: run_queue.sh <queue_file> [start_index]
#
# Queue file: one cell per line, `<cfg_path> <task> [epochs]` (epochs default 20), split on
# spaces or tabs; lines starting with '#' and blank lines are skipped. start_index is
# 1-based and counts cells only (comments do not shift it). Cells appended to the file
# while the queue runs are picked up; do not edit lines that are already there.
#
# Environment:
#   RUN_ONE        per-cell runner (default: run_one.sh next to this script)
#   DEMO_HOSTNAME  host name to print instead of `hostname -s` (demo boxes share one host)
#   PROXY_HOOK     shell snippet evaluated first, errors ignored (default: none)
#
# Exit: 0 if every cell run exited 0, else 1. FINISHED is printed for failures too.

set -u

usage() {
    echo "usage: run_queue.sh <queue_file> [start_index]" >&2
    exit 1
}

[ $# -ge 1 ] || usage
QUEUE=$1
START=${2:-1}
if [ ! -f "$QUEUE" ] || [ ! -r "$QUEUE" ]; then
    echo "run_queue.sh: queue file not found: $QUEUE" >&2
    usage
fi
case $START in
    '' | *[!0-9]*) echo "run_queue.sh: start_index must be a positive integer: $START" >&2; usage ;;
esac
START=$((10#$START))
[ "$START" -ge 1 ] || usage

if [ -n "${PROXY_HOOK:-}" ]; then
    eval "$PROXY_HOOK" >/dev/null 2>&1 || true
fi

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
RUN_ONE=${RUN_ONE:-$SCRIPT_DIR/run_one.sh}

if [ -n "${DEMO_HOSTNAME:-}" ]; then
    HOST=$DEMO_HOSTNAME
else
    HOST=$(hostname -s 2>/dev/null) || HOST=
    [ -n "$HOST" ] || HOST=$(uname -n)
fi

RULE='======================================================================'

ts() { date '+%Y-%m-%d %H:%M:%S'; }

# is_cell LINE: true for a non-blank line whose first non-blank character is not '#'.
is_cell() {
    local line=${1%$'\r'}
    line=${line#"${line%%[![:space:]]*}"}
    [ -n "$line" ] && [ "${line:0:1}" != "#" ]
}

count_cells() {
    local n=0 line
    while IFS= read -r line || [ -n "$line" ]; do
        if is_cell "$line"; then n=$((n + 1)); fi
    done < "$QUEUE"
    echo "$n"
}

TOTAL=$(count_cells)
echo "=== Queue $QUEUE: $TOTAL ablations, starting from $START on $HOST ==="

i=0
FAILED=()
# fd 3 so that nothing the cells run can read queue lines from stdin.
while IFS= read -r line <&3 || [ -n "$line" ]; do
    is_cell "$line" || continue
    i=$((i + 1))
    [ "$i" -ge "$START" ] || continue

    line=${line%$'\r'}
    read -r CFG TASK EPOCHS _ <<< "$line"
    EPOCHS=${EPOCHS:-20}
    TASK=${TASK:-}
    NAME=$(basename "$CFG" .yaml)
    TOTAL=$(count_cells)   # cells may have been appended since the start

    echo "$RULE"
    echo "[$(ts)] [$i/$TOTAL] STARTING $NAME ($TASK, ${EPOCHS}ep)"
    echo "$RULE"
    bash "$RUN_ONE" "$CFG" "$TASK" "$EPOCHS" < /dev/null
    RC=$?
    echo "[$(ts)] [$i/$TOTAL] FINISHED $NAME (exit=$RC)"
    if [ "$RC" -ne 0 ]; then
        FAILED+=("$NAME")
    fi
done 3< "$QUEUE"

if [ "${#FAILED[@]}" -eq 0 ]; then
    echo "[$(ts)] === QUEUE DONE on $HOST -- all $TOTAL cell(s) exited 0 ==="
    exit 0
fi
echo "[$(ts)] === QUEUE DONE on $HOST -- ${#FAILED[@]} cell(s) FAILED: ${FAILED[*]} ==="
exit 1
