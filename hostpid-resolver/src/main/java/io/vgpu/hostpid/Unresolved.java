package io.vgpu.hostpid;

/** The in-container pid maps to no single live process of the pod. */
public record Unresolved(Reason reason) implements PidResolution {
  @Override
  public boolean isResolved() {
    return false;
  }

  /** Why; a small fixed set, fit for a metric label. */
  public enum Reason {
    /** No live process of that pod (and container, if given) has this innermost pid. */
    NOT_IN_POD,
    /** Several processes of the pod have it and no container id tells them apart. */
    AMBIGUOUS,
    /** This resolver resolved it before, and that process (pid + start time) has since exited. */
    PROCESS_GONE,
    /** Not a usable pid (zero or negative). */
    INVALID_PID
  }

  private static final Unresolved NOT_IN_POD = new Unresolved(Reason.NOT_IN_POD);
  private static final Unresolved AMBIGUOUS = new Unresolved(Reason.AMBIGUOUS);
  private static final Unresolved PROCESS_GONE = new Unresolved(Reason.PROCESS_GONE);
  private static final Unresolved INVALID_PID = new Unresolved(Reason.INVALID_PID);

  public Unresolved {
    if (reason == null) {
      throw new IllegalArgumentException("reason must not be null");
    }
  }

  /** The shared instance for {@code reason}. */
  public static Unresolved of(Reason reason) {
    return switch (reason) {
      case NOT_IN_POD -> NOT_IN_POD;
      case AMBIGUOUS -> AMBIGUOUS;
      case PROCESS_GONE -> PROCESS_GONE;
      case INVALID_PID -> INVALID_PID;
    };
  }
}
