#!/usr/bin/env bash
# The API server down for minutes mid-run, then back (issue 7): the live exporter with a
# node-scoped informer against fabric8's mock API server (expectations mode), the server destroyed
# for API_OUTAGE_SECONDS (default 300), then restarted on the same port with a pod created during
# the outage. Asserts every scrape meanwhile (200, neighbour exact, last known pod names,
# apiserver_up 0, /readyz 200 with a kubernetes: reason), that threads, fds and heap after GC do not
# grow, and that the informer reconnects and the new pod's metadata arrives within 60 s of the
# server's return. Prints a footprint sample every 10 s.
#   make soak-apiserver                          5 minutes
#   API_OUTAGE_SECONDS=180 scripts/apiserver-outage.sh
# `make test` runs the same test with a 4 s outage.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_jdk25
OUTAGE=${API_OUTAGE_SECONDS:-300}
rc=0
./mvnw -B -ntp -o -q -pl exporter test -Dspotless.check.skip=true -Dsurefire.failIfNoSpecifiedTests=false \
  -Dtest='io.vgpu.exporter.reliability.ApiServerOutageTest' \
  -Dvgpu.reliability.apiOutageSeconds="$OUTAGE" || rc=$?
grep -h '^outage:' exporter/target/surefire-reports/io.vgpu.exporter.reliability.ApiServerOutageTest-output.txt || true
if [ "$rc" -ne 0 ]; then echo "apiserver-outage: FAIL (${OUTAGE} s outage)"; exit "$rc"; fi
echo "apiserver-outage: PASS (${OUTAGE} s outage)"
