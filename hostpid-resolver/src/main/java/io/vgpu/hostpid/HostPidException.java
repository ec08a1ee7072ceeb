package io.vgpu.hostpid;

/**
 * The module's only exceptions: the procfs root as a whole is unusable. Per-process trouble
 * (exited, unreadable, malformed) is never an exception; it is a {@link ProcessRead} value.
 */
public abstract sealed class HostPidException extends RuntimeException
    permits ProcFsUnavailableException {

  private static final long serialVersionUID = 1L;

  HostPidException(String message, Throwable cause) {
    super(message, cause);
  }
}
