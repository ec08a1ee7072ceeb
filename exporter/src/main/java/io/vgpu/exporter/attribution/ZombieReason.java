package io.vgpu.exporter.attribution;

/** Why a live-looking slot belongs to no running process. */
public enum ZombieReason {
  /** The process is gone (SIGKILL and OOM-kill leave status 1 and the usage behind). */
  PROCESS_GONE("process_gone"),
  /** The in-container pid now belongs to another process (start time or hostpid tell). */
  PID_REUSED("pid_reused");

  private final String label;

  ZombieReason(String label) {
    this.label = label;
  }

  public String label() {
    return label;
  }
}
