package io.vgpu.exporter.attribution;

/** Why a slot's recorded hostpid is not the host pid its process really has. A metric label set. */
public enum MismatchReason {
  /** hostpid equals the in-container pid: HAMi-core's detection on drivers 535-560. */
  CONTAINER_PID("container_pid"),
  /** hostpid was never found (0). */
  ZERO("zero"),
  /** hostpid names no live process. */
  DEAD("dead"),
  /** hostpid names a live process of another pod (a wrong guess, or a tenant lying). */
  OTHER_POD("other_pod"),
  /** hostpid names some other live process (host daemon, another process of the same pod). */
  OTHER("other");

  private final String label;

  MismatchReason(String label) {
    this.label = label;
  }

  public String label() {
    return label;
  }
}
