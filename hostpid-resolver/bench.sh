#!/usr/bin/env bash
# Runs the hostpid-resolver JMH benchmarks briefly (sized for a 2-core shared machine).
# Usage: hostpid-resolver/bench.sh [extra JMH args, e.g. a benchmark regex]
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
export JAVA_HOME
./mvnw -B -ntp -o -q -pl hostpid-resolver test-compile dependency:build-classpath \
  -Dmdep.outputFile="$PWD/hostpid-resolver/target/bench.classpath" -Dmdep.includeScope=test -Dspotless.check.skip=true
cp="hostpid-resolver/target/test-classes:hostpid-resolver/target/classes:$(cat hostpid-resolver/target/bench.classpath)"
args=("$@")
[ ${#args[@]} -eq 0 ] && args=('io.vgpu.hostpid.bench.')
exec "$JAVA_HOME/bin/java" -cp "$cp" org.openjdk.jmh.Main -f1 -wi 2 -i 3 -w 2s -r 3s "${args[@]}"
