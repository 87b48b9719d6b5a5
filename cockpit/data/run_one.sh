#!/usr/bin/env bash
# run_one.sh — run ONE sweep cell (platform-facts §6.3): the cockpit's own cell runner.
#
# Usage: run_one.sh <config_yaml> <task> [epochs=20]
#
# Deployed by `cockpit launch` (versioned by content). It runs the sweep's `launch.command`
# with bash, the cell's values passed as environment variables (never spliced into the
# command text): CFG, TASK, EPOCHS, NAME and CKPT_DIR (= $COCKPIT_CKPT/<NAME>).
#
# Environment (set by the launcher):
#   COCKPIT_COMMAND  the command that trains one cell (required)
#   COCKPIT_LOGS     folder of per-run logs: <NAME>.log is tee'd there (required)
#   COCKPIT_CKPT     checkpoint root (required)
#   COCKPIT_DURABLE  durable root: best.pth, best_metrics.json and the log are copied to
#                    <COCKPIT_DURABLE>/<NAME>/ after a successful run (empty: no sync)
#
# Exit: the command's exit code if non-zero, else 0, or 2 when the durable sync was blocked
# or failed. Copies go through <file>.partial + cmp + mv: never half a file under its name.

set -u

if [ $# -lt 2 ]; then
    echo "usage: run_one.sh <config_yaml> <task> [epochs=20]" >&2
    exit 1
fi
: "${COCKPIT_COMMAND:?set by cockpit launch}" "${COCKPIT_LOGS:?}" "${COCKPIT_CKPT:?}"

CFG=$1
TASK=$2
EPOCHS=${3:-20}
NAME=$(basename "$CFG" .yaml)
CKPT_DIR=$COCKPIT_CKPT/$NAME
export CFG TASK EPOCHS NAME CKPT_DIR
mkdir -p "$COCKPIT_LOGS" "$CKPT_DIR"
LOG=$COCKPIT_LOGS/$NAME.log

bash -c "$COCKPIT_COMMAND" 2>&1 | tee "$LOG"
RC=${PIPESTATUS[0]}
if [ "$RC" -ne 0 ]; then
    exit "$RC"
fi

if [ -n "${COCKPIT_DURABLE:-}" ]; then
    DEST=$COCKPIT_DURABLE/$NAME
    mkdir -p "$DEST" || { echo "!! DURABLE SYNC FAILED for $NAME — cannot create $DEST (check df -i)"; exit 2; }
    for FILE in best.pth best_metrics.json; do
        if [ ! -f "$CKPT_DIR/$FILE" ]; then
            echo "!! DURABLE SYNC BLOCKED for $NAME — $FILE is missing in $CKPT_DIR"
            exit 2
        fi
    done
    for SRC in "$CKPT_DIR/best.pth" "$CKPT_DIR/best_metrics.json" "$LOG"; do
        BASE=$(basename "$SRC")
        if ! { cp -- "$SRC" "$DEST/$BASE.partial" && cmp -s -- "$SRC" "$DEST/$BASE.partial" \
                && mv -- "$DEST/$BASE.partial" "$DEST/$BASE"; }; then
            rm -f -- "$DEST/$BASE.partial"
            echo "!! DURABLE SYNC FAILED for $NAME — check 'df -i $COCKPIT_DURABLE'. The data-disk copy is source-of-truth."
            exit 2
        fi
    done
    echo "synced $NAME to durable storage ($DEST)"
fi
exit 0
