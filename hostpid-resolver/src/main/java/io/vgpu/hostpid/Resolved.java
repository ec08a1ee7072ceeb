package io.vgpu.hostpid;

/**
 * The in-container pid is exactly one live process of the pod (and container, if given).
 *
 * @param hostPid its pid in the procfs's namespace
 * @param startTimeTicks its start time; pass both to {@link HostPidResolver#isAlive} later
 */
public record Resolved(int hostPid, long startTimeTicks) implements PidResolution {
  @Override
  public boolean isResolved() {
    return true;
  }

  public Resolved {
    if (hostPid <= 0 || startTimeTicks < 0) {
      throw new IllegalArgumentException(
          "hostPid must be positive and startTimeTicks >= 0: " + hostPid + "/" + startTimeTicks);
    }
  }
}
