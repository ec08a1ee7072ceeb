#!/usr/bin/env bash
# README.md and docs/: every relative link lands on a file (and, for #anchors into Markdown, on a
# heading); README.md stays short (<= 300 lines) and keeps the two setup commands; every `make X`
# it names is a Makefile target; every repository path it names in a command exists.
#   scripts/check-docs.sh [ROOT]    (ROOT: a repository tree, default this one; the self-test uses it)
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, blanks to '-'.
anchors_of() {
  grep -E '^#{1,6} ' "$1" | sed -E 's/^#+ +//' | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

mapfile -t docs < <(ls README.md docs/*.md 2>/dev/null)
[ ${#docs[@]} -ge 2 ] && ok || bad "no README.md and docs/*.md found under $root"
for doc in "${docs[@]}"; do
  dir="$(dirname "$doc")"
  # [text](target) outside code spans; external links (a scheme) are not fetched.
  while IFS= read -r target; do
    [ -n "$target" ] || continue
    case "$target" in
      http://* | https://* | mailto:*) continue ;;
    esac
    path="${target%%#*}"
    anchor=""
    [[ "$target" == *"#"* ]] && anchor="${target#*#}"
    if [ -z "$path" ]; then file="$doc"; else file="$dir/$path"; fi
    if [ ! -e "$file" ]; then
      bad "$doc: link ($target): no $file"
      continue
    fi
    if [ -n "$anchor" ] && [[ "$file" == *.md ]]; then
      if anchors_of "$file" | grep -qx -- "$anchor"; then ok; else bad "$doc: link ($target): no heading #$anchor in $file"; fi
    else
      ok
    fi
  done < <(sed -E 's/`[^`]*`//g' "$doc" | grep -oE '\]\([^) ]+\)' | sed -E 's/^\]\(//; s/\)$//')
done

readme=README.md
lines=$(wc -l <"$readme")
[ "$lines" -le 300 ] && ok || bad "$readme has $lines lines (at most 300: move details to docs/)"
for cmd in "make demo" "make test"; do
  grep -qxE "    $cmd" "$readme" && ok || bad "$readme: the setup command '$cmd' is not on a line of its own"
done
# make targets named in README.md (in code: `make x`, "    make x")
mapfile -t targets < <(grep -oE '(^ +|`)make [a-z][a-z0-9-]*' "$readme" | sed -E 's/^[ `]*make //' | sort -u)
[ ${#targets[@]} -ge 3 ] && ok || bad "$readme names fewer than 3 make targets (the check matched nothing?)"
for t in "${targets[@]}"; do
  grep -qE "^$t:" Makefile && ok || bad "$readme: make $t: no such target in Makefile"
done
# repository paths named in README.md's commands and code spans
mapfile -t paths < <(grep -oE '(deploy|scripts|bin|grafana|docs|libvgpu|exporter)/[A-Za-z0-9_./-]*[A-Za-z0-9_-]' "$readme" | sort -u)
[ ${#paths[@]} -ge 5 ] && ok || bad "$readme names fewer than 5 repository paths (the check matched nothing?)"
for p in "${paths[@]}"; do
  [ -e "$p" ] && ok || bad "$readme: path $p does not exist"
done

echo "check-docs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
