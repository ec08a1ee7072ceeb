/*
 * shrreg-tool — inspect and repair a container's shared region from inside the container.
 *
 * Runs in a tenant container with no JVM: reads every region layout HAMi-core ever wrote (L0a, L0b,
 * v1.1, the mislabelled v1.1-broken, v1.2 with or without our extension block), writes only v1.1 and
 * v1.2. Process liveness is judged in the tool's own pid namespace from the slot's container pid
 * (HAMi semantics); `--host` switches to the recorded host pids for use from the node.
 *
 * The region bytes, the layout table, the reader, liveness and the slot-table lock are the
 * library's (src/region.c, linked in statically): the tool's units (tools/shrreg_tool.h lists
 * them) are the command line, the judgement of what to change and the output; this one is the
 * entry point: SIGBUS recovery and the command dispatch.
 *
 * Threading: single-threaded. Slot-table edits (cleanup) happen under the region's slot lock.
 * A SIGBUS from a file that shrinks under the mapping is turned into an I/O error, not a crash.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shrreg_tool.h"

static void on_sigbus(int sig) {
  (void)sig;
  if (g_bus_armed) siglongjmp(g_bus_jmp, 1);
  _exit(EXIT_IO);
}

/* ---------------------------------------------------------------------------------------------- */

int shrreg_tool_main(int argc, char **argv) {
  options_t o;
  struct sigaction sa;
  int rc;
  g_expect = NULL;
  rc = parse_args(argc, argv, &o);
  if (rc != EXIT_OK) return rc;
  g_expect_opts = o;
  g_expect = &g_expect_opts;
  if (o.cmd == CMD_HELP) {
    usage(stdout);
    return EXIT_OK;
  }
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, NULL);
  if (sigsetjmp(g_bus_jmp, 1) != 0) {
    region_t *held = g_held;
    region_t *mapped = g_mapped;
    struct stat st;
    volatile int released = 0; /* set between sigsetjmp and a possible second longjmp */
    g_bus_armed = 0;
    if (held != NULL) {
      /* The lock's page is mapped (taking the lock touched it); if releasing faults anyway, the
       * lock stays with this dead process and the others' dead-holder recovery takes over. */
      if (sigsetjmp(g_bus_jmp, 1) == 0) {
        g_bus_armed = 1;
        lock_release(held);
        released = 1;
      }
      g_bus_armed = 0;
    }
    if (mapped != NULL && stat(mapped->path, &st) == 0 && (uint64_t)st.st_size < (uint64_t)mapped->v.size)
      return fail(EXIT_IO, "%s: the file shrank while it was read (recreated?); run again", o.file);
    return fail(EXIT_IO,
                "%s: a page of the region could not be read or written (SIGBUS: a hole of a sparse file "
                "on a full filesystem, or an I/O error)%s",
                o.file, held == NULL ? "" : released ? "; the region lock was released" : "; the region lock could not be released");
  }
  g_bus_armed = 1;
  switch (o.cmd) {
    case CMD_INSPECT: rc = cmd_inspect(&o); break;
    case CMD_VERSION: rc = cmd_version(&o); break;
    case CMD_SET_SM:
    case CMD_SET_MEM: rc = cmd_set_limit(&o); break;
    case CMD_CLEANUP: rc = cmd_cleanup(&o); break;
    case CMD_UNLOCK: rc = cmd_force_unlock(&o); break;
    default: rc = EXIT_USAGE; break;
  }
  g_bus_armed = 0;
  fflush(stdout);
  return rc;
}

#ifndef SHRREG_TOOL_NO_MAIN
int main(int argc, char **argv) { return shrreg_tool_main(argc, argv); }
#endif
