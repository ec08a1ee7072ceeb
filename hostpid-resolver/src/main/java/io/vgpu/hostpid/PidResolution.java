package io.vgpu.hostpid;

/** The answer for one in-container pid: a host process, or why there is none. */
public sealed interface PidResolution permits Resolved, Unresolved {

  /** True for {@link Resolved}. */
  boolean isResolved();
}
