#!/usr/bin/env bash
# After `mvn install` in `make test`: a skipped test is not a passed one. Fails when any module's
# surefire report counts a skipped test (an assumption that did not hold: a tool missing, a build
# that failed, no root), or when a module ran no tests at all; prints each skipped test's reason.
#   usage: scripts/check-no-skips.sh [MODULE_DIR...]   (default: every module of the reactor)
set -euo pipefail
cd "$(dirname "$0")/.."
modules=("$@")
[ ${#modules[@]} -gt 0 ] || modules=(region-codec hostpid-resolver exporter)
bad=0
for m in "${modules[@]}"; do
  reports=("$m"/target/surefire-reports/TEST-*.xml)
  if [ ! -e "${reports[0]}" ]; then
    echo "check-no-skips: $m has no surefire reports (did its tests run?)" >&2
    bad=1
    continue
  fi
  python3 - "${reports[@]}" <<'PY' || bad=1
import sys, xml.etree.ElementTree as ET
skipped = []
for path in sys.argv[1:]:
    suite = ET.parse(path).getroot()
    for case in suite.iter("testcase"):
        s = case.find("skipped")
        if s is not None:
            reason = (s.get("message") or s.text or "").strip().splitlines()
            skipped.append(f"{case.get('classname')}.{case.get('name')}: {reason[0] if reason else '(no reason)'}")
for line in skipped:
    print("check-no-skips: skipped " + line, file=sys.stderr)
sys.exit(1 if skipped else 0)
PY
done
[ "$bad" -eq 0 ] && echo "check-no-skips: no skipped test in ${modules[*]}"
exit "$bad"
