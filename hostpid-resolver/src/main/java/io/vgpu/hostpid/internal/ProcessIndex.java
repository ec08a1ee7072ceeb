package io.vgpu.hostpid.internal;

import io.vgpu.hostpid.CgroupIdentity;
import io.vgpu.hostpid.ProcessInfo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** One scan's processes, indexed by host pid and by pod; immutable once built. */
public final class ProcessIndex {

  private final Map<Integer, ProcessInfo> byHostPid;
  private final Map<String, Pod> byPod;
  private final int unknownCgroupCount;
  private final int podProcessCount;
  private final long scannedAtNanos;

  private ProcessIndex(
      Map<Integer, ProcessInfo> byHostPid,
      Map<String, Pod> byPod,
      int unknownCgroupCount,
      int podProcessCount,
      long scannedAtNanos) {
    this.byHostPid = byHostPid;
    this.byPod = byPod;
    this.unknownCgroupCount = unknownCgroupCount;
    this.podProcessCount = podProcessCount;
    this.scannedAtNanos = scannedAtNanos;
  }

  /** Indexes {@code processes} (distinct host pids) as of {@code scannedAtNanos}. */
  public static ProcessIndex build(List<ProcessInfo> processes, long scannedAtNanos) {
    Map<Integer, ProcessInfo> byHostPid = HashMap.newHashMap(processes.size());
    Map<String, List<ProcessInfo>> podMembers = new HashMap<>();
    int unknown = 0;
    int inPods = 0;
    for (ProcessInfo process : processes) {
      byHostPid.put(process.hostPid(), process);
      CgroupIdentity cgroup = process.cgroup();
      switch (cgroup.kind()) {
        case KUBEPODS -> {
          inPods++;
          podMembers
              .computeIfAbsent(cgroup.podUid().orElseThrow(), uid -> new ArrayList<>())
              .add(process);
        }
        case UNKNOWN -> unknown++;
        case HOST -> {}
      }
    }
    Map<String, Pod> byPod = HashMap.newHashMap(podMembers.size());
    podMembers.forEach((uid, members) -> byPod.put(uid, new Pod(members)));
    return new ProcessIndex(byHostPid, byPod, unknown, inPods, scannedAtNanos);
  }

  /** The process with this host pid, or null. */
  public ProcessInfo process(int hostPid) {
    return byHostPid.get(hostPid);
  }

  /** Whether the process with this pid and start time was live at the scan. */
  public boolean contains(int hostPid, long startTimeTicks) {
    ProcessInfo process = byHostPid.get(hostPid);
    return process != null && process.startTimeTicks() == startTimeTicks;
  }

  /** The pod with this normalized UID, or null when the scan saw no process of it. */
  public Pod pod(String normalizedPodUid) {
    return byPod.get(normalizedPodUid);
  }

  public long scannedAtNanos() {
    return scannedAtNanos;
  }

  public int unknownCgroupCount() {
    return unknownCgroupCount;
  }

  public int podProcessCount() {
    return podProcessCount;
  }

  public int size() {
    return byHostPid.size();
  }

  /** One pod's processes, by innermost pid. */
  public static final class Pod {
    private final List<ProcessInfo> processes;
    private final Map<Integer, List<ProcessInfo>> byInnermostPid;

    Pod(List<ProcessInfo> members) {
      this.processes = List.copyOf(members);
      Map<Integer, List<ProcessInfo>> byInnermost = HashMap.newHashMap(members.size());
      for (ProcessInfo process : members) {
        byInnermost.computeIfAbsent(process.innermostPid(), pid -> new ArrayList<>(1)).add(process);
      }
      byInnermost.replaceAll((pid, list) -> List.copyOf(list));
      this.byInnermostPid = byInnermost;
    }

    /** The pod's processes whose innermost pid is {@code pid}, in the container if given. */
    public List<ProcessInfo> withInnermostPid(int pid, Optional<String> containerId) {
      List<ProcessInfo> all = byInnermostPid.getOrDefault(pid, List.of());
      return containerId.isEmpty() ? all : inContainer(all, containerId.get());
    }

    /** All the pod's processes, or the container's if given. */
    public List<ProcessInfo> processes(Optional<String> containerId) {
      return containerId.isEmpty() ? processes : inContainer(processes, containerId.get());
    }

    private static List<ProcessInfo> inContainer(List<ProcessInfo> candidates, String id) {
      if (candidates.size() == 1) {
        return candidates.getFirst().cgroup().containerId().filter(id::equals).isPresent()
            ? candidates
            : List.of();
      }
      List<ProcessInfo> matching = new ArrayList<>(candidates.size());
      for (ProcessInfo process : candidates) {
        if (process.cgroup().containerId().filter(id::equals).isPresent()) {
          matching.add(process);
        }
      }
      return matching;
    }
  }
}
