#!/usr/bin/env bash
# Runs one module's JMH benchmarks from its test classes (where the generated harness lives).
# Usage: scripts/jmh.sh MODULE [--main CLASS] [JMH args...]
#   scripts/jmh.sh region-codec -f1 -wi 2 -i 3 -w 1s -r 1s -prof gc SnapshotBenchmark
# Builds the module's test classes offline, resolves its test class path, then runs JMH (or CLASS)
# in a fresh JVM with native access enabled.
set -euo pipefail
cd "$(dirname "$0")/.."
module=${1:?usage: scripts/jmh.sh MODULE [--main CLASS] [JMH args...]}
shift
main=org.openjdk.jmh.Main
if [[ "${1:-}" == "--main" ]]; then
  main=${2:?--main needs a class name}
  shift 2
fi
. scripts/lib.sh
need_jdk25
./mvnw -B -ntp -o -q -pl "$module" -am install -DskipTests -Dspotless.check.skip=true
./mvnw -B -ntp -o -q -pl "$module" test-compile dependency:build-classpath \
  -Dmdep.outputFile="$PWD/$module/target/bench.classpath" -Dmdep.includeScope=test -Dspotless.check.skip=true
classpath="$module/target/test-classes:$module/target/classes:$(cat "$module/target/bench.classpath")"
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -cp "$classpath" "$main" "$@"
