#!/usr/bin/env bash
# Runs region-codec's JMH benchmarks. Arguments go to org.openjdk.jmh.Main, e.g.
#   region-codec/bench.sh -f1 -wi 2 -i 3 -w 1s -r 1s -prof gc SnapshotBenchmark
# or, for thread CPU time per snapshot (useful on a loaded shared machine):
#   region-codec/bench.sh --cpu-time
# Builds the module's test classes (which carry the generated JMH harness), resolves the test
# classpath offline, then runs JMH in a forked JVM.
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
cp_file=region-codec/target/bench.classpath
./mvnw -B -ntp -o -q -pl region-codec test-compile dependency:build-classpath \
  -Dmdep.outputFile=target/bench.classpath -Dmdep.includeScope=test -Dspotless.check.skip=true
classpath="region-codec/target/test-classes:region-codec/target/classes:$(cat "$cp_file")"
main=org.openjdk.jmh.Main
if [[ "${1:-}" == "--cpu-time" ]]; then
  shift
  main=io.vgpu.regioncodec.bench.SnapshotCpuTime
fi
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -cp "$classpath" "$main" "$@"
