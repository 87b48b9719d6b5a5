# cockpit manifest: size and SHA-256 of every file under each expected cell folder.
#
# Usage: sh -c "$(cat manifest.sh)" cockpit-manifest ROOT QUEUE_LOG CELL...
# (QUEUE_LOG may be empty). POSIX sh, coreutils and openssl or sha256sum; no Python. It
# reads and prints only; it never creates or changes a file. Names and paths are printed
# base64-encoded, so any byte in them (newline, quote, `$(...)`) is data, never syntax.
#
# Output: "@@hasher NAME", then per cell "@@cell B64NAME exists|missing" followed by
# "F SIZE SHA256 B64RELPATH" (a regular file) or "R B64RELPATH" (refused: a symlink,
# anything else that is not a regular file, or anything whose name starts with a dot — a
# dot-folder such as .git/ is refused whole and never descended into), then "@@extra
# B64NAME" for folders under ROOT no cell names, then "@@runbook SIZE SHA256" when ROOT holds
# the runbook's own PULL_MANIFEST.json, then "@@marks none|missing|found" followed by the
# base64 STARTING/FINISHED lines of QUEUE_LOG, then "@@end".

root=$1; queue_log=$2; shift 2
case "$root" in "~") root=$HOME ;; "~/"*) root="$HOME/${root#"~/"}" ;; esac
case "$queue_log" in "~/"*) queue_log="$HOME/${queue_log#"~/"}" ;; esac
LC_ALL=C
export LC_ALL

# The CPU's SHA extensions make openssl ~5x faster than coreutils' sha256sum here.
if command -v openssl >/dev/null 2>&1 && printf '' | openssl dgst -sha256 -r >/dev/null 2>&1; then
  hasher=openssl
elif command -v sha256sum >/dev/null 2>&1; then
  hasher=sha256sum
else
  echo "@@error no SHA-256 tool on the box (need openssl or sha256sum)"
  exit 3
fi
echo "@@hasher $hasher"

b64() { printf '%s' "$1" | base64 | tr -d '\n'; }

# Run once per batch of paths by find: every path is an argument, never parsed text.
files='hasher=$1; dir=$2; shift 2
for p in "$@"; do
  rel=${p#"$dir"/}
  enc=$(printf "%s" "$rel" | base64 | tr -d "\n")
  if [ -L "$p" ] || [ ! -f "$p" ]; then echo "R $enc"; continue; fi
  size=$(stat -c %s -- "$p") || { echo "R $enc"; continue; }
  if [ "$hasher" = openssl ]; then
    sum=$(openssl dgst -sha256 -r < "$p")
  else
    sum=$(sha256sum < "$p")
  fi || { echo "R $enc"; continue; }
  echo "F $size ${sum%% *} $enc"
done'

# Dot-entries (.git/, .ssh/, .bashrc) are listed as refused and never descended into.
refuse='dir=$1; shift
for p in "$@"; do
  rel=${p#"$dir"/}
  echo "R $(printf "%s" "$rel" | base64 | tr -d "\n")"
done'

for cell in "$@"; do
  dir="$root/$cell"
  if [ -L "$dir" ] || [ ! -d "$dir" ]; then
    echo "@@cell $(b64 "$cell") missing"
    continue
  fi
  echo "@@cell $(b64 "$cell") exists"
  find "$dir" -mindepth 1 -name '.*' -prune -exec sh -c "$refuse" sh "$dir" {} + \
    -o ! -type d -exec sh -c "$files" sh "$hasher" "$dir" {} +
done

if [ -d "$root" ]; then
  for entry in "$root"/* "$root"/.[!.]* "$root"/..?*; do
    [ -d "$entry" ] || continue
    name=${entry##*/}
    known=0
    for cell in "$@"; do [ "$cell" = "$name" ] && known=1 && break; done
    [ "$known" = 1 ] || echo "@@extra $(b64 "$name")"
  done
fi

runbook="$root/PULL_MANIFEST.json"
if [ -f "$runbook" ] && [ ! -L "$runbook" ]; then
  size=$(stat -c %s -- "$runbook") && if [ "$hasher" = openssl ]; then
    sum=$(openssl dgst -sha256 -r < "$runbook")
  else
    sum=$(sha256sum < "$runbook")
  fi && echo "@@runbook $size ${sum%% *}"
fi

# The last 8000 marks: the newest STARTING/FINISHED of every cell of a long queue.
if [ -z "$queue_log" ]; then
  echo "@@marks none"
elif [ -f "$queue_log" ]; then
  echo "@@marks found"
  grep -E '] (STARTING|FINISHED) ' -- "$queue_log" 2>/dev/null | tail -n 8000 | base64
else
  echo "@@marks missing"
fi
echo "@@end"
