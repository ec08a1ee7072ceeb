package io.vgpu.exporter.attribution;

import io.vgpu.exporter.text.SnakeCaseLabel;

/** Why a slot's recorded hostpid is not the host pid its process really has. A metric label set. */
public enum MismatchReason implements SnakeCaseLabel {
  /** hostpid equals the in-container pid: HAMi-core's detection on drivers 535-560. */
  CONTAINER_PID,
  /** hostpid was never found (0). */
  ZERO,
  /** hostpid names no live process. */
  DEAD,
  /** hostpid names a live process of another pod (a wrong guess, or a tenant lying). */
  OTHER_POD,
  /** hostpid names some other live process (host daemon, another process of the same pod). */
  OTHER;
}
