package io.vgpu.exporter.attribution;

import io.vgpu.exporter.text.SnakeCaseLabel;

/** Why a live-looking slot belongs to no running process. */
public enum ZombieReason implements SnakeCaseLabel {
  /** The process is gone (SIGKILL and OOM-kill leave status 1 and the usage behind). */
  PROCESS_GONE,
  /** The in-container pid now belongs to another process (start time or hostpid tell). */
  PID_REUSED;
}
