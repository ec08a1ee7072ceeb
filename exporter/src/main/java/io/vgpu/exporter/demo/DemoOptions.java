package io.vgpu.exporter.demo;

import java.time.Clock;

/**
 * What a {@link DemoNode} simulates.
 *
 * @param containers healthy running containers (1-{@value DemoNode#MAX_CONTAINERS})
 * @param gpus GPUs of the vGPU pods (1-{@value DemoNode#MAX_GPUS}, less the other sharing kinds'
 *     GPUs); every third container uses two of them, the others one, spread evenly
 * @param processesPerContainer live processes of each healthy container (1-3), or 0 for 1 to 3
 *     varying by container (the default node)
 * @param idleContainers how many of the healthy containers (the last ones) hold memory but launch
 *     no kernels: their last kernel is two hours before the node started (an idle notebook, a
 *     leak), their SM utilization 0
 * @param pidNamespaces put each container's processes in a PID namespace of their own when running
 *     as root (as in a real pod); false spawns plain processes, which starts many demo nodes on one
 *     machine much faster
 * @param problems add one pod per {@link DemoProblem}
 * @param otherSharing add the pods that hold a GPU without a region ({@link DemoHolders}: a
 *     whole-GPU pod, a MIG-partitioned GPU with two MIG pods, a time-sliced GPU with two pods) on
 *     {@value DemoHolders#GPUS} more GPUs
 * @param clock the node's clock: timestamps, heartbeats, the handshake and how usage moves
 */
public record DemoOptions(
    int containers,
    int gpus,
    int processesPerContainer,
    int idleContainers,
    boolean pidNamespaces,
    boolean problems,
    boolean otherSharing,
    Clock clock) {
  public DemoOptions {
    if (containers < 1 || containers > DemoNode.MAX_CONTAINERS) {
      throw new IllegalArgumentException(
          "containers must be 1-" + DemoNode.MAX_CONTAINERS + ", was " + containers);
    }
    int most = DemoNode.MAX_GPUS - (otherSharing ? DemoHolders.GPUS : 0);
    if (gpus < 1 || gpus > most) {
      throw new IllegalArgumentException(
          "gpus must be 1-"
              + most
              + (otherSharing ? " (the other sharing kinds take " + DemoHolders.GPUS + ")" : "")
              + ", was "
              + gpus);
    }
    if (processesPerContainer < 0 || processesPerContainer > 3) {
      throw new IllegalArgumentException(
          "processes per container must be 0 (varying) or 1-3, was " + processesPerContainer);
    }
    if (idleContainers < 0 || idleContainers > containers) {
      throw new IllegalArgumentException(
          "idle containers must be 0-" + containers + ", was " + idleContainers);
    }
    java.util.Objects.requireNonNull(clock, "clock");
  }

  /** {@code containers} healthy containers on 2 GPUs, no deliberate problems, the system clock. */
  public static DemoOptions of(int containers) {
    return new DemoOptions(containers, 2, 0, 0, true, false, false, Clock.systemUTC());
  }

  public DemoOptions withProblems(boolean value) {
    return new DemoOptions(
        containers,
        gpus,
        processesPerContainer,
        idleContainers,
        pidNamespaces,
        value,
        otherSharing,
        clock);
  }

  public DemoOptions withOtherSharing(boolean value) {
    return new DemoOptions(
        containers,
        gpus,
        processesPerContainer,
        idleContainers,
        pidNamespaces,
        problems,
        value,
        clock);
  }

  public DemoOptions withClock(Clock value) {
    return new DemoOptions(
        containers,
        gpus,
        processesPerContainer,
        idleContainers,
        pidNamespaces,
        problems,
        otherSharing,
        value);
  }
}
