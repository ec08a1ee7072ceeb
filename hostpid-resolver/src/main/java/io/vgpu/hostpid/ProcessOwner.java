package io.vgpu.hostpid;

import java.util.Optional;

/**
 * The pod (and container) a host process belongs to, and the pid it has inside.
 *
 * @param hostPid pid in the procfs's namespace
 * @param startTimeTicks start time, to tell a reused pid apart
 * @param podUid normalized pod UID
 * @param containerId bare container id, empty when the cgroup is the pod's own
 * @param innermostPid the pid the process sees for itself (last NSpid field)
 */
public record ProcessOwner(
    int hostPid,
    long startTimeTicks,
    String podUid,
    Optional<String> containerId,
    int innermostPid) {

  public ProcessOwner {
    if (hostPid <= 0 || innermostPid <= 0 || startTimeTicks < 0) {
      throw new IllegalArgumentException(
          "pids must be positive and start time >= 0: "
              + hostPid
              + "/"
              + innermostPid
              + "/"
              + startTimeTicks);
    }
    if (podUid == null || CgroupIdentity.normalizePodUid(podUid).filter(podUid::equals).isEmpty()) {
      throw new IllegalArgumentException("podUid must be a normalized pod UID, got " + podUid);
    }
    if (containerId == null) {
      throw new IllegalArgumentException("containerId must not be null (use Optional.empty())");
    }
  }

  /** The owner of a process whose cgroup identity is a pod, or empty. */
  public static Optional<ProcessOwner> of(ProcessInfo process) {
    CgroupIdentity cgroup = process.cgroup();
    if (!cgroup.isPod()) {
      return Optional.empty();
    }
    return Optional.of(
        new ProcessOwner(
            process.hostPid(),
            process.startTimeTicks(),
            cgroup.podUid().orElseThrow(),
            cgroup.containerId(),
            process.innermostPid()));
  }
}
