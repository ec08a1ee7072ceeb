/*
 * vgpu-exporter: the image's command for the exporter and its operator tools.
 *
 *   vgpu-exporter [serve|doctor|inspect|cleanup|unlock|version|...] [ARGS...]
 *
 * Replaces itself with the image's Java runtime running the exporter jar:
 *   /opt/vgpu-exporter/jre/bin/java JVM-OPTIONS... -jar /opt/vgpu-exporter/exporter.jar ARGS...
 * ARGS are passed through untouched. The image has no shell (a FROM-scratch base holding only
 * glibc), so this cannot be a script; it is linked statically like vgpu-install. JVM-OPTIONS are
 * VGPU_EXPORTER_JAVA_OPTS split at blanks (as bin/vgpu-exporter splits it; the image and the chart
 * set it), else the footprint flags compiled in below, so `kubectl exec POD -- vgpu-exporter
 * doctor` starts the same JVM as the pod's own process. They are passed as arguments, not through
 * JDK_JAVA_OPTIONS, for which java prints "Picked up JDK_JAVA_OPTIONS: ..." before every command.
 * Exit codes: those of the exporter; 127 when the runtime cannot be started, 2 for too many options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Overridable at build time so the launcher can be tested outside the image. */
#ifndef JAVA_BIN
#define JAVA_BIN "/opt/vgpu-exporter/jre/bin/java"
#endif
#ifndef EXPORTER_JAR
#define EXPORTER_JAR "/opt/vgpu-exporter/exporter.jar"
#endif
/* bin/vgpu-exporter's footprint flags (JvmOptionsConsistencyTest keeps them equal) and the /tmp the
 * read-only image has (JNA unpacks its stub there). */
#ifndef DEFAULT_JAVA_OPTS
#define DEFAULT_JAVA_OPTS                                                                          \
  "-XX:+UseSerialGC -Xms16m -Xmx48m -XX:MaxMetaspaceSize=64m -XX:ReservedCodeCacheSize=32m "      \
  "-Xss512k -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:TrimNativeHeapInterval=5000 "        \
  "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 -XX:-ShrinkHeapInSteps "                        \
  "-XX:+ExitOnOutOfMemoryError -Djava.io.tmpdir=/tmp -Djna.tmpdir=/tmp"
#endif
#define MAX_JAVA_OPTS 64

int main(int argc, char **argv) {
  const char *env = getenv("VGPU_EXPORTER_JAVA_OPTS");
  char *opts = strdup(env != NULL && env[0] != '\0' ? env : DEFAULT_JAVA_OPTS);
  /* java, the options, -jar, the jar, the caller's arguments (argv[1..argc-1]) and the NULL. */
  size_t n = (size_t)(argc > 0 ? argc - 1 : 0);
  char **args = calloc(n + MAX_JAVA_OPTS + 4, sizeof *args);
  size_t k = 0;
  if (opts == NULL || args == NULL) {
    fprintf(stderr, "vgpu-exporter: out of memory\n");
    return 127;
  }
  args[k++] = (char *)JAVA_BIN;
  for (char *save = NULL, *o = strtok_r(opts, " \t\n", &save); o != NULL; o = strtok_r(NULL, " \t\n", &save)) {
    if (k > MAX_JAVA_OPTS) {
      fprintf(stderr, "vgpu-exporter: more than %d options in VGPU_EXPORTER_JAVA_OPTS\n", MAX_JAVA_OPTS);
      return 2;
    }
    args[k++] = o;
  }
  args[k++] = (char *)"-jar";
  args[k++] = (char *)EXPORTER_JAR;
  for (size_t i = 0; i < n; i++) args[k++] = argv[1 + i];
  args[k] = NULL;
  execv(JAVA_BIN, args);
  fprintf(stderr, "vgpu-exporter: cannot run %s: %s\n", JAVA_BIN, strerror(errno));
  free(args);
  free(opts);
  return 127;
}
