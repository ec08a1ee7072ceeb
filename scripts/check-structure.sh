#!/usr/bin/env bash
# Structure rules that fail the build (issue 34 item 3):
#   sizes     no tracked .java/.c/.h/.inc file over MAX_LINES lines (split it by concern), no
#             exceptions.
#   includes  libvgpu's own sources and headers (#include "...", and <...> that names a file of
#             libvgpu/include) form no include cycle (file level; checked with tsort).
#   calls     (--calls OBJDIR only; make -C libvgpu lint) the objects of OBJDIR form no call
#             cycle: A -> B when A.o uses a symbol B.o defines (nm). Two units that call each other
#             are one unit in two files (issue 34 named limiter_measure.c <-> limiter_bucket.c).
# Usage: scripts/check-structure.sh [--sizes|--includes|--calls OBJDIR] [TREE]
#   TREE defaults to the repository root; its files are those git tracks there (every file when
#   TREE is not a git work tree). Exit 0: clean; 1: a rule broken (each offender printed).
set -euo pipefail

MAX_LINES=600

mode=all
objdir=
case "${1:-}" in
  --sizes) mode=sizes; shift ;;
  --includes) mode=includes; shift ;;
  --calls) mode=calls; objdir=$(realpath "${2:?--calls needs a directory of objects}"); shift 2 ;;
  -*) echo "usage: $0 [--sizes|--includes|--calls OBJDIR] [TREE]" >&2; exit 2 ;;
esac
tree=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$tree"

tracked() { # NUL-separated paths of the files under the tree (git's list where there is one)
  if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    git ls-files -z
  else
    find . -type f -print0 | sed -z 's|^\./||'
  fi
}

fail=0

check_sizes() {
  local f n
  # One wc over every source file ("N path" lines, then a total line that names no file).
  while read -r n f; do
    [ -f "$f" ] || continue
    if [ "$n" -gt "$MAX_LINES" ]; then
      echo "structure: $f has $n lines, over $MAX_LINES: split it by concern"
      fail=1
    fi
  done < <(tracked | grep -zE '\.(java|c|h|inc)$' | xargs -0 -r wc -l --)
}

# normalize PATH: drops "." and resolves ".." segments (no file system access).
normalize() {
  local IFS=/ part out=()
  for part in $1; do
    case $part in
      '' | .) ;;
      ..) [ "${#out[@]}" -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  echo "${out[*]}"
}

# Edges "includer included" between libvgpu's own files. An include resolves the way the builds
# resolve it: next to the including file, then libvgpu/include, then libvgpu/src.
include_edges() {
  local f line dir name target cand
  local -a files=()
  mapfile -d '' -t files < <(tracked | grep -zE '^libvgpu/.*\.(c|h|inc|def)$')
  [ "${#files[@]}" -gt 0 ] || return 0
  for f in "${files[@]}"; do echo "$f $f"; done # every file is a node, included or not
  # One grep over all of them: "file:#include ..." lines.
  while IFS= read -r line; do
    f=${line%%:*}
    line=${line#*:}
    dir=${f%/*}
    target=
    if [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
      name=${BASH_REMATCH[1]}
      for cand in "$dir/$name" "libvgpu/include/$name" "libvgpu/src/$name"; do
        if [ -f "$cand" ]; then target=$(normalize "$cand"); break; fi
      done
    elif [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<([^\>]+)\> ]]; then
      name=${BASH_REMATCH[1]}
      [ -f "libvgpu/include/$name" ] && target="libvgpu/include/$name"
    fi
    if [ "$target" = "$f" ]; then
      echo "#self $f"
    elif [ -n "$target" ]; then
      echo "$f $target"
    fi
  done < <(grep -HE '^[[:space:]]*#[[:space:]]*include' -- "${files[@]}" || [ $? -eq 1 ])
}

check_includes() {
  local edges out rc=0
  edges=$(include_edges)
  if [ -z "$edges" ]; then
    return 0 # no libvgpu in this tree
  fi
  # A file that includes itself is a cycle tsort does not report (it reads "a a" as a node).
  while read -r _ self; do
    echo "structure: include cycle: $self includes itself"
    fail=1
  done < <(grep '^#self ' <<< "$edges" || [ $? -eq 1 ])
  edges=$(grep -v '^#self ' <<< "$edges" || [ $? -eq 1 ])
  out=$(tsort <<< "$edges" 2>&1 > /dev/null) || rc=$?
  if [ "$rc" -ne 0 ] || grep -q 'loop' <<< "$out"; then
    echo "structure: include cycle among libvgpu's files (tsort):"
    sed 's/^/  /' <<< "$out"
    fail=1
  fi
}

# Edges "user definer" between the objects of $objdir, one per symbol one uses and another defines.
call_edges() {
  local o sym
  declare -A definer=()
  for o in "$objdir"/*.o; do
    echo "${o##*/} ${o##*/}" # every object is a node
    while read -r sym; do
      definer[$sym]=${o##*/}
    done < <(nm -g --defined-only --format=just-symbols "$o")
  done
  for o in "$objdir"/*.o; do
    while read -r sym; do
      if [ -n "${definer[$sym]:-}" ] && [ "${definer[$sym]}" != "${o##*/}" ]; then
        echo "${o##*/} ${definer[$sym]}"
      fi
    done < <(nm -g --undefined-only --format=just-symbols "$o")
  done
  return 0
}

check_calls() {
  local out rc=0
  if ! compgen -G "$objdir/*.o" > /dev/null; then
    echo "structure: no objects in $objdir"
    fail=1
    return
  fi
  out=$(call_edges | sort -u | tsort 2>&1 > /dev/null) || rc=$?
  if [ "$rc" -ne 0 ] || grep -q 'loop' <<< "$out"; then
    echo "structure: call cycle among the objects of $objdir (A uses B's symbols and B A's; tsort):"
    sed 's/^/  /' <<< "$out"
    fail=1
  fi
}

case $mode in
  sizes) check_sizes ;;
  includes) check_includes ;;
  calls) check_calls ;;
  all) check_sizes; check_includes ;;
esac
[ "$fail" -eq 0 ]
