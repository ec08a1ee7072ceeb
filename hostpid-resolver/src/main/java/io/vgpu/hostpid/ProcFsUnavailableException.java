package io.vgpu.hostpid;

import java.nio.file.Path;

/** The procfs root cannot be listed: wrong {@code --path.procfs}, or not mounted. */
public final class ProcFsUnavailableException extends HostPidException {

  private static final long serialVersionUID = 1L;

  private final transient Path root;

  public ProcFsUnavailableException(Path root, Throwable cause) {
    super(
        "cannot list procfs root "
            + root
            + " ("
            + cause
            + "); point the procfs root at the host's /proc (hostPID: true, or a /proc mount)",
        cause);
    this.root = root;
  }

  public Path root() {
    return root;
  }
}
