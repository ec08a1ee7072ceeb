/*
 * hostpid.c — this process's pid as the node sees it, for its slot (HAMi-core's hostpid).
 * Split from state.c.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "state.h"
#include "vgpu.h"

void vgpu_hostpid_detect(struct vgpu_slot_identity *id) {
  id->pid = (int32_t)getpid();
  char link[64] = {0};
  ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
  if (n > 0 && strcmp(link, "pid:[4026531836]") == 0) { /* the initial pid namespace */
    id->hostpid = id->pid;
    id->hostpid_source = VGPU_HOSTPID_SAME_NAMESPACE;
    return;
  }
  FILE *f = fopen("/proc/self/status", "re");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      int outer = 0, inner = 0;
      if (sscanf(line, "NSpid: %d %d", &outer, &inner) == 2 && outer > 0) {
        id->hostpid = outer;
        id->hostpid_source = VGPU_HOSTPID_NSPID;
      }
    }
    fclose(f);
  }
  if (!id->hostpid)
    VGPU_LOG_INFO("host pid is unknown inside this pid namespace (host pid is error is expected "
                  "here); slot hostpid left 0 for the node exporter to fill");
}
