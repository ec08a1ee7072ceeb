package io.vgpu.hostpid;

import java.util.List;

/**
 * What one host process is: its pid in the procfs's namespace, its start time (to tell a reused pid
 * apart), its pid in every nested PID namespace and the pod/container its cgroup says it belongs
 * to.
 *
 * @param hostPid pid as seen by the procfs root (the exporter runs with hostPID, so the host pid)
 * @param startTimeTicks field 22 of {@code stat}: start time in clock ticks after boot
 * @param nsPids the {@code NSpid:} chain, outermost first; the first equals {@code hostPid}, the
 *     last is the pid the process sees for itself (what a region slot records)
 * @param cgroup the pod/container identity from {@code /proc/<pid>/cgroup}
 */
public record ProcessInfo(
    int hostPid, long startTimeTicks, List<Integer> nsPids, CgroupIdentity cgroup) {

  public ProcessInfo {
    if (hostPid <= 0) {
      throw new IllegalArgumentException("hostPid must be positive, got " + hostPid);
    }
    if (startTimeTicks < 0) {
      throw new IllegalArgumentException("startTimeTicks must be >= 0, got " + startTimeTicks);
    }
    nsPids = List.copyOf(nsPids);
    if (nsPids.isEmpty() || nsPids.getFirst() != hostPid) {
      throw new IllegalArgumentException(
          "nsPids must start with hostPid " + hostPid + ", got " + nsPids);
    }
    for (int pid : nsPids) {
      if (pid <= 0) {
        throw new IllegalArgumentException("nsPids must be positive, got " + nsPids);
      }
    }
    if (cgroup == null) {
      throw new IllegalArgumentException("cgroup must not be null (use CgroupIdentity.unknown())");
    }
  }

  /** The pid the process sees for itself: the last NSpid field. */
  public int innermostPid() {
    return nsPids.getLast();
  }

  /** How many PID namespaces deep the process is; 1 for a process of the procfs's own namespace. */
  public int namespaceDepth() {
    return nsPids.size();
  }
}
