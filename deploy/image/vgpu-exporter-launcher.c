/*
 * vgpu-exporter: the image's command for the exporter and its operator tools.
 *
 *   vgpu-exporter [serve|doctor|inspect|cleanup|unlock|version|...] [ARGS...]
 *
 * Replaces itself with the image's Java runtime running the exporter jar:
 *   /opt/vgpu-exporter/jre/bin/java -jar /opt/vgpu-exporter/exporter.jar ARGS...
 * ARGS are passed through untouched. The image has no shell (a FROM-scratch base holding only
 * glibc), so this cannot be a script; it is linked statically like vgpu-install. JVM options come
 * from JDK_JAVA_OPTIONS, which the java launcher itself reads (the image and the chart set it), so
 * `kubectl exec POD -- vgpu-exporter doctor` starts the same JVM as the pod's own process.
 * Exit codes: those of the exporter; 127 when the runtime cannot be started.
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

int main(int argc, char **argv) {
  /* java, -jar, the jar, the caller's arguments (argv[1..argc-1]) and the terminating NULL. */
  size_t n = (size_t)(argc > 0 ? argc - 1 : 0);
  char **args = calloc(n + 4, sizeof *args);
  if (args == NULL) {
    fprintf(stderr, "vgpu-exporter: out of memory\n");
    return 127;
  }
  args[0] = (char *)JAVA_BIN;
  args[1] = (char *)"-jar";
  args[2] = (char *)EXPORTER_JAR;
  for (size_t i = 0; i < n; i++) args[3 + i] = argv[1 + i];
  args[3 + n] = NULL;
  execv(JAVA_BIN, args);
  fprintf(stderr, "vgpu-exporter: cannot run %s: %s\n", JAVA_BIN, strerror(errno));
  free(args);
  return 127;
}
