# cockpit probe: one long-lived, read-only telemetry process per host.
#
# Runs under POSIX sh with coreutils (nvidia-smi optional); no Python on the remote.
# It never creates or modifies a file. It reads one request per tick on stdin (the
# client paces ticks, so there is no sleep here) and answers with one framed record.
# It exits when stdin closes, so a dropped SSH session leaves no orphan behind.
#
# Request (one item per line, paths are the rest of the line and never evaluated):
#   tick SEQ | mount PATH | stat KEY PATH | text PATH | marks PATH | dir PATH | ckpt PATH |
#   proc PATTERN | ptree | kmsg | log INODE OFFSET PATH | read INODE OFFSET LIMIT PATH |
#   read64 INODE OFFSET LIMIT B64PATH | end
# Record: "@@begin SEQ EPOCH HOST", "@@tz +HHMM" ... sections starting with "@@" ... "@@end SEQ".
# Command output never starts with "@@"; file contents are base64-encoded, and so is every
# file name the box chose (run logs, checkpoints: "@@dir64", "@@ckpt64", "@@log64"), so a
# name holding a newline and "@@proc" is data, never a section. A path the client sent is
# one request line, so echoing it in a section header cannot start a new line.

with_gpu=${1:-1}
# Bytes of log text per tick, summed over ALL logs (before base64). One record must stay
# well inside the SSH channel's 2 MiB window or it is never read: 40 logs of 64 KiB each
# made every record too big, so the box was never watched. Logs catch up over the next
# ticks from their offsets. The client shares the budget out (LOG_BUDGET in probe.py).
budget_per_tick=262144
# Most bytes one `log` request reads (the client's `read` names its own limit).
cap=262144
# Bytes of the run-log listing (~1000 logs); a longer listing is cut at an entry.
dir_cap=131072
# Bytes of queue marks sent on first contact (the last 4000 marks of the master log).
marks_cap=262144
# Bytes of the queue file (read again only when it changes).
text_cap=65536
# Lines of `ps` for the process tree, and tmux sessions listed.
ptree_lines=20000
tmux_lines=256
# Lines of one nvidia-smi answer: a row or an error line per GPU (64 at most), or for
# `nvidia-smi -L` a GPU and its up to 7 MIG devices (MAX_GPU_LINES in parse.py); compute
# processes listed (MAX_GPU_PROCESSES); bytes of one line (MAX_GPU_LINE_CHARS).
gpu_lines=512
apps_lines=4096
line_cap=512
LC_ALL=C
export LC_ALL

have() { command -v "$1" >/dev/null 2>&1; }
# printf, not echo: dash's echo rewrites backslash sequences (\t, \c) inside paths.
say() { printf '%s\n' "$*"; }
# Set P to the path $1 as the tools must see it, without forking: a leading ~ is expanded
# like a shell would, and a path starting with - is prefixed with ./ so that find, stat
# and df can never read it as an option (`-delete`!).
resolve() {
  case "$1" in
    "~") P=$HOME ;;
    "~/"*) P="$HOME/${1#"~/"}" ;;
    -*) P="./$1" ;;
    *) P=$1 ;;
  esac
}

find_printf=0
if find / -maxdepth 0 -printf '' >/dev/null 2>&1; then find_printf=1; fi
df_output=0
if df -B1 --output=itotal,target / >/dev/null 2>&1; then df_output=1; fi
# A hostname is any 64 bytes (sethostname takes a newline): keep it to one printable line.
host=$(uname -n | tr -c '[:graph:]\n' '?' | tr -d '\n')
uid=$(id -u)
nl='
'
mounts=
budget=$budget_per_tick

gpu_section() {
  if [ "$with_gpu" != 1 ]; then echo "@@gpu skipped"; return; fi
  if ! have nvidia-smi; then echo "@@gpu absent"; return; fi
  echo "@@gpu"
  smi "$gpu_lines" --query-gpu=index,name,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm,mig.mode.current --format=csv,noheader,nounits
  mig=$?
  echo "@@apps"
  smi "$apps_lines" --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits
  # Only a GPU with MIG on has MIG devices to list (smi returns 3 when a row ended so).
  if [ "$mig" = 3 ]; then echo "@@mig"; smi "$gpu_lines" -L; fi
}

# Run `nvidia-smi ARGS...` (stderr merged) and print its answer, then "@@rc STATUS". Streamed
# through awk, never held in a variable: at most $1 lines of at most $line_cap bytes each,
# blank lines dropped, and a line that would read as a section header indented. Returns 3 when
# a line ends in ", Enabled" (a --query-gpu row whose mig.mode.current is Enabled).
smi() {
  max=$1; shift
  { nvidia-smi "$@" 2>&1; r=$?; echo; say "@@rc $r"; } | awk -v max="$max" -v cap="$line_cap" '
    NR > 1 && last != "" {
      if (last ~ /, Enabled$/) mig = 1
      if (n < max) { l = substr(last, 1, cap); if (l ~ /^@@/) l = " " l; print l; n++ }
    }
    { last = $0 }
    END { print last; exit (mig ? 3 : 0) }'
}

first_line() { IFS= read -r v < "$1" 2>/dev/null && say "$v"; }
keyed() {  # lines of file $1 whose first word is one of the remaining arguments
  f=$1; shift
  [ -r "$f" ] || return 0
  while IFS= read -r l; do
    for k in "$@"; do case "$l" in "$k "*|"$k:"*) say "$l" ;; esac; done
  done < "$f"
}

mem_section() {
  # Builtins only (read, case): no process is forked for memory.
  if [ -f /sys/fs/cgroup/memory.current ]; then
    echo "@@mem cgroup-v2"
    say "current $(first_line /sys/fs/cgroup/memory.current)"
    say "max $(first_line /sys/fs/cgroup/memory.max)"
    keyed /sys/fs/cgroup/memory.events oom_kill
  elif [ -f /sys/fs/cgroup/memory/memory.usage_in_bytes ]; then
    echo "@@mem cgroup-v1"
    say "current $(first_line /sys/fs/cgroup/memory/memory.usage_in_bytes)"
    say "max $(first_line /sys/fs/cgroup/memory/memory.limit_in_bytes)"
    keyed /sys/fs/cgroup/memory/memory.oom_control oom_kill
  else
    echo "@@mem none"
  fi
  echo "@@meminfo"
  keyed /proc/meminfo MemTotal MemAvailable
}

tmux_section() {
  # `tmux ls` creates its socket directory when it is missing; only ask a server that
  # already exists, so the probe stays read-only.
  sockdir="${TMUX_TMPDIR:-/tmp}/tmux-$uid"
  if ! have tmux; then echo "@@tmux absent"; return; fi
  if [ ! -d "$sockdir" ]; then echo "@@tmux none"; return; fi
  echo "@@tmux"
  # Session names are the user's: one with a newline must not start a line with "@@".
  guard "$(tmux ls -F '#{session_created} #{session_windows} #{session_name}' 2>/dev/null)" \
    "$tmux_lines"
}

# Print the text $1 line by line, at most $2 lines; a line that would read as a section
# header is indented (builtins only: no fork).
guard() {
  rest=$1; n=0
  while [ -n "$rest" ] && [ "$n" -lt "$2" ]; do
    l=${rest%%"$nl"*}
    case "$rest" in *"$nl"*) rest=${rest#*"$nl"} ;; *) rest= ;; esac
    case "$l" in @@*) l=" $l" ;; esac
    say "$l"; n=$((n + 1))
  done
}

flush_mounts() {
  # One df for every requested mount that exists (rows come back in argument order);
  # a missing path gets df's own error text without running df for it.
  [ -n "$mounts" ] || return 0
  saved_ifs=$IFS; IFS=$nl; set -f
  set -- $mounts
  IFS=$saved_ifs; set +f
  mounts=
budget=$budget_per_tick
  if [ "$df_output" != 1 ]; then
    for m in "$@"; do
      resolve "$m"; p=$P
      say "@@mount $m"; echo "@@posix"; df -P -B1 -- "$p" 2>&1
      echo "@@posix-inodes"; df -P -i -- "$p" 2>&1; say "@@rc $?"
    done
    return 0
  fi
  existing=
  for m in "$@"; do
    resolve "$m"; p=$P
    if [ -e "$p" ]; then existing="$existing$p$nl"; fi
  done
  rows=
  if [ -n "$existing" ]; then
    saved_ifs=$IFS; IFS=$nl; set -f
    rows=$(df -B1 --output=itotal,iused,iavail,size,used,avail,fstype,target -- $existing 2>/dev/null) \
      || rows=
    IFS=$saved_ifs; set +f
    if [ -z "$rows" ]; then
      # df failed on one of them: ask path by path so no row is attributed to the wrong path.
      for m in "$@"; do
        resolve "$m"; p=$P
        say "@@mount $m"
        df -B1 --output=itotal,iused,iavail,size,used,avail,fstype,target -- "$p" 2>&1
      done
      return 0
    fi
  fi
  # Drop df's header, then hand out one row per existing path, in order.
  rows=${rows#*"$nl"}
  for m in "$@"; do
    resolve "$m"; p=$P
    say "@@mount $m"
    if [ -e "$p" ]; then
      say "${rows%%"$nl"*}"
      case "$rows" in *"$nl"*) rows=${rows#*"$nl"} ;; *) rows= ;; esac
    else
      say "df: $p: No such file or directory"
    fi
  done
}

stat_item() {
  say "@@stat $1 $2"
  resolve "$2"
  stat -c '%s %Y %i' -- "$P" 2>/dev/null
}

text_item() {
  say "@@text $1"
  resolve "$1"
  size=$(stat -c '%s' -- "$P" 2>/dev/null) || return 0
  # head: the file may grow between stat and read.
  if [ "$size" -le "$text_cap" ]; then head -c "$text_cap" -- "$P" 2>/dev/null | base64; fi
}

# The queue's marker lines from the whole master log, once, when the client first attaches
# (the log itself is then followed from its last 64 KiB). Bounded to the last 4000 marks.
marks_item() {
  say "@@marks $1"
  resolve "$1"
  [ -f "$P" ] || return 0
  grep -E 'STARTING|FINISHED|QUEUE DONE|=== Queue ' -- "$P" 2>/dev/null | tail -n 4000 \
    | tail -c "$marks_cap" | base64
}

# "SIZE MTIME INODE PATH\0" per log, base64: a name may hold any byte but NUL.
dir_item() {
  say "@@dir64 $1"
  resolve "$1"
  [ -d "$P" ] || return 0
  if [ "$find_printf" = 1 ]; then
    # find, not a glob: 100k logs would overflow stat's argument list.
    find "$P/" -mindepth 1 -maxdepth 1 -name '*.log' ! -name '.*' \
      -printf '%s %Ts %i %p\0' 2>/dev/null | head -c "$dir_cap" | base64
  else
    # One stat for all logs; an unmatched glob stays literal and stat's error is dropped.
    stat --printf '%s %Y %i %n\0' -- "$P"/*.log 2>/dev/null | head -c "$dir_cap" | base64
  fi
}

# The newest checkpoint as "MTIME SIZE PATH\0", base64.
ckpt_item() {
  say "@@ckpt64 $1"
  resolve "$1"
  [ -d "$P" ] || return 0
  if [ "$find_printf" = 1 ]; then
    find "$P" -maxdepth 4 -type f \( -name '*.pth' -o -name '*.pt' -o -name '*.ckpt' \
      -o -name '*.safetensors' \) -printf '%T@ %s %p\0' 2>/dev/null | sort -z -n \
      | tail -z -n 1 | base64
  fi
}

proc_item() {
  # PIDs of processes running the queue file $1, whether their argv names it by absolute
  # path or relative to their working directory (`bash run_queue.sh queue_1.txt`).
  say "@@proc $1"
  resolve "$1"; want=$P
  base=${want##*/}
  if have ps; then
    PAT="$base" SELF=$$ ps -eo pid=,args= 2>/dev/null | PAT="$base" SELF=$$ awk '
      { pid = $1; line = $0; sub(/^ *[0-9]+ /, "", line) }
      # A tmux server keeps the argv of the client that started it (`tmux new-session ...
      # bash run_queue.sh QUEUE`) for as long as it lives: it is not the queue.
      pid != ENVIRON["SELF"] && index(line, "cockpit-probe") == 0 && index(line, ENVIRON["PAT"]) > 0 \
        && $2 !~ /(^|\/)tmux$/ {
        for (i = 2; i <= NF; i++) if (index($i, ENVIRON["PAT"]) > 0) { print pid, $i; break }
      }'
  else
    for d in /proc/[0-9]*; do
      pid=${d#/proc/}
      [ "$pid" = "$$" ] && continue
      set -f
      for tok in $(tr '\0' ' ' < "$d/cmdline" 2>/dev/null); do
        case "$tok" in *cockpit-probe*) break ;; *"$base"*) say "$pid $tok"; break ;; esac
      done
    done
  fi | while read -r pid tok; do
    case "$tok" in
      /*) full=$tok ;;
      *) full="$(readlink "/proc/$pid/cwd" 2>/dev/null)/${tok#./}" ;;
    esac
    [ "$full" = "$want" ] && say "$pid"
  done
}

# Every process's parent (to tell which GPU processes belong to the queue: zombie VRAM).
ptree_item() {
  if have ps; then
    echo "@@ptree"
    ps -eo pid=,ppid= 2>/dev/null | head -n "$ptree_lines"
  else
    echo "@@ptree absent"
  fi
}

# GPU Xid and OOM-killer lines of the kernel log, when this user may read it (containers
# usually may not: dmesg_restrict). Asked for now and then, not every tick.
kmsg_item() {
  if have dmesg && dmesg >/dev/null 2>&1; then
    echo "@@kmsg"
    dmesg 2>/dev/null | grep -E 'NVRM: Xid|Out of memory: Killed|oom-kill' | tail -n 20
  else
    echo "@@kmsg denied"
  fi
}

log_item() {
  # $1 inode the client believes, $2 offset (negative: start that many bytes from the end),
  # $3 the most bytes to read, $4 the path. The section header is printed by the caller.
  # Numbers longer than 18 digits are refused: sh arithmetic on them would end the probe.
  case "$1" in ''|*[!0-9]*) echo "missing"; return 0 ;; esac
  case "$2" in ''|-|*[!0-9-]*|?*-*) echo "missing"; return 0 ;; esac
  case "$3" in ''|*[!0-9]*) echo "missing"; return 0 ;; esac
  if [ "${#1}" -gt 20 ] || [ "${#2}" -gt 18 ] || [ "${#3}" -gt 18 ]; then
    echo "missing"; return 0
  fi
  resolve "$4"
  st=$(stat -c '%i %s' -- "$P" 2>/dev/null) || { echo "missing"; return 0; }
  cino=${st% *}; csize=${st#* }
  off=$2; reset=0
  case "$off" in
    -*) off=$((csize + off)); [ "$off" -lt 0 ] && off=0; reset=1 ;;
    *) if [ "$cino" != "$1" ] || [ "$csize" -lt "$off" ]; then off=0; reset=1; fi ;;
  esac
  n=$((csize - off)); [ "$n" -gt "$3" ] && n=$3
  [ "$n" -gt "$budget" ] && n=$budget
  budget=$((budget - n))
  say "$cino $off $reset $n"
  if [ "$n" -gt 0 ]; then tail -c +"$((off + 1))" -- "$P" 2>/dev/null | head -c "$n" | base64; fi
}

while IFS= read -r line; do
  kind=${line%% *}; rest=${line#* }
  [ "$kind" = mount ] || flush_mounts
  case "$kind" in
    tick)
      budget=$budget_per_tick
      now=$(date '+%s %z')
      say "@@begin $rest ${now%% *} $host"
      say "@@tz ${now#* }"
      # Seconds since boot (a builtin read, no fork): the box's uptime for the billing view.
      if [ -r /proc/uptime ] && IFS=' ' read -r up _ < /proc/uptime; then say "@@uptime $up"; fi
      gpu_section; mem_section; tmux_section ;;
    mount) mounts="$mounts$rest$nl"; continue ;;
    stat) stat_item "${rest%% *}" "${rest#* }" ;;
    text) text_item "$rest" ;;
    dir) dir_item "$rest" ;;
    ckpt) ckpt_item "$rest" ;;
    marks) marks_item "$rest" ;;
    proc) proc_item "$rest" ;;
    ptree) ptree_item ;;
    kmsg) kmsg_item ;;
    log)
      a=${rest%% *}; rest=${rest#* }; b=${rest%% *}
      say "@@log ${rest#* }"
      log_item "$a" "$b" "$cap" "${rest#* }" ;;
    read|read64)
      a=${rest%% *}; rest=${rest#* }; b=${rest%% *}; rest=${rest#* }; c=${rest%% *}
      rest=${rest#* }
      if [ "$kind" = read ]; then
        say "@@log $rest"
      else
        # The exact bytes of a name the box chose (the "x" keeps a trailing newline).
        say "@@log64 $rest"
        rest=$(printf '%s' "$rest" | base64 -d 2>/dev/null; echo x); rest=${rest%x}
      fi
      log_item "$a" "$b" "$c" "$rest" ;;
    end) say "@@end $rest" ;;
  esac
done
