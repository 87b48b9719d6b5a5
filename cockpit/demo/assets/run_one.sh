#!/usr/bin/env bash
# run_one.sh — run ONE sweep cell in a cockpit demo box (platform-facts §6.3, sandboxed).
#
# Usage: run_one.sh <config_yaml> <task> [epochs=20]
#
# Profile (environment; the demo box sets COCKPIT_BOX):
#   PY           python that can import cockpit.demo.trainer (required; the demo exports the
#                interpreter it runs under — if PY is unset, $COCKPIT_BOX/demo.env is sourced)
#   DATA_DIR     data disk (default $COCKPIT_BOX/data)
#   DURABLE_DIR  durable storage (default $COCKPIT_BOX/durable; set it empty to skip the sync)
#   PROXY_HOOK   shell snippet evaluated first (default: none); failure aborts the cell
#
# Layout:
#   $DATA_DIR/checkpoints/<NAME>/{latest.pth,best.pth,best_metrics.json}
#   $DATA_DIR/runs/logs/<NAME>.log                    (tee'd: stdout gets it too)
#   $DURABLE_DIR/<NAME>/{best.pth,best_metrics.json,<NAME>.log}   (after a successful run)
#
# Exit: the trainer's exit code if non-zero, else SYNC_EXIT (0, or 2 if the durable sync
# was blocked or failed). Copies to durable storage go through <file>.partial + cmp + mv,
# so a file never appears there under its final name half-written.

set -u

if [ $# -lt 2 ]; then
    echo "usage: run_one.sh <config_yaml> <task> [epochs=20]" >&2
    exit 1
fi

CFG=$1
TASK=$2
EPOCHS=${3:-20}
NAME=$(basename "$CFG" .yaml)

if [ -z "${PY:-}" ] && [ -n "${COCKPIT_BOX:-}" ] && [ -r "$COCKPIT_BOX/demo.env" ]; then
    # shellcheck disable=SC1091
    . "$COCKPIT_BOX/demo.env"
fi

if [ -n "${PROXY_HOOK:-}" ]; then
    if ! eval "$PROXY_HOOK"; then
        echo "PROFILE SETUP FAILED: PROXY_HOOK ($PROXY_HOOK) returned non-zero" >&2
        exit 1
    fi
fi

if [ -z "${PY:-}" ]; then
    echo "PROFILE SETUP FAILED: PY is not set (the python that runs the demo)" >&2
    exit 1
fi
if ! "$PY" -c 'import sys' >/dev/null 2>&1; then
    echo "PROFILE SETUP FAILED: interpreter '$PY' is not usable" >&2
    exit 1
fi

if [ -z "${DATA_DIR:-}" ]; then
    if [ -z "${COCKPIT_BOX:-}" ]; then
        echo "PROFILE SETUP FAILED: neither DATA_DIR nor COCKPIT_BOX is set" >&2
        exit 1
    fi
    DATA_DIR=$COCKPIT_BOX/data
fi
# Unset means the box default; set-but-empty means "skip the durable sync".
if [ -z "${DURABLE_DIR+x}" ]; then
    DURABLE_DIR=${COCKPIT_BOX:+$COCKPIT_BOX/durable}
fi

CKPT_DIR=$DATA_DIR/checkpoints/$NAME
LOG_DIR=$DATA_DIR/runs/logs
LOG=$LOG_DIR/$NAME.log
if ! mkdir -p "$CKPT_DIR" "$LOG_DIR"; then
    echo "PROFILE SETUP FAILED: cannot create $CKPT_DIR or $LOG_DIR" >&2
    exit 1
fi

export PYTHONUNBUFFERED=1

"$PY" -m cockpit.demo.trainer \
    --config "$CFG" \
    --task "$TASK" \
    --epochs "$EPOCHS" \
    --name "$NAME" \
    --ckpt-dir "$CKPT_DIR" 2>&1 < /dev/null | tee "$LOG"
RC=${PIPESTATUS[0]}

if [ "$RC" -eq 0 ] && [ -f "$CKPT_DIR/best.pth" ]; then
    rm -f -- "$CKPT_DIR/latest.pth"
    echo "[$(date +%H:%M:%S)] kept best.pth, pruned latest.pth for $NAME" | tee -a "$LOG"
fi

# copy_verified SRC DEST_DIR: SRC -> DEST_DIR/<base>.partial, cmp, then rename into place.
copy_verified() {
    local src=$1 dest_dir=$2 base
    base=$(basename "$src")
    local partial=$dest_dir/$base.partial final=$dest_dir/$base
    if cp -- "$src" "$partial" && cmp -s -- "$src" "$partial" \
        && mv -f -- "$partial" "$final" && cmp -s -- "$src" "$final"; then
        return 0
    fi
    rm -f -- "$partial"
    return 1
}

SYNC_EXIT=0
if [ "$RC" -eq 0 ] && [ -n "$DURABLE_DIR" ]; then
    FS_DIR=$DURABLE_DIR/$NAME
    if [ ! -f "$CKPT_DIR/best.pth" ] || [ ! -f "$CKPT_DIR/best_metrics.json" ]; then
        echo "!! DURABLE SYNC BLOCKED for $NAME — best.pth or best_metrics.json is missing."
        SYNC_EXIT=2
    elif mkdir -p -- "$FS_DIR" \
        && copy_verified "$CKPT_DIR/best.pth" "$FS_DIR" \
        && copy_verified "$CKPT_DIR/best_metrics.json" "$FS_DIR" \
        && copy_verified "$LOG" "$FS_DIR"; then
        echo "[$(date +%H:%M:%S)] synced $NAME to durable storage ($FS_DIR)"
    else
        echo "!! DURABLE SYNC FAILED for $NAME — check 'df -i $DURABLE_DIR'. The data-disk copy is source-of-truth."
        SYNC_EXIT=2
    fi
fi

if [ "$RC" -ne 0 ]; then
    exit "$RC"
fi
exit "$SYNC_EXIT"
