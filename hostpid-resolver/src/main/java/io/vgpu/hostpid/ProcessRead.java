package io.vgpu.hostpid;

/**
 * The outcome of reading one process from procfs. Only {@link Found} carries facts; the others say
 * why there are none, so a scan can count them instead of catching exceptions.
 */
public sealed interface ProcessRead {

  /** Why a present process could not be used. A small fixed set, fit for a metric label. */
  enum Problem {
    /** {@code stat} has no closing parenthesis, too few fields or a non-numeric start time. */
    MALFORMED_STAT,
    /** {@code status} has no usable {@code NSpid:} line, or it does not start with the pid. */
    MALFORMED_STATUS,
    /** A file exceeds the per-file read bound ({@link ProcFs#MAX_FILE_BYTES}). */
    TOO_LARGE,
    /** Permission denied, not a regular file, or another I/O error than "gone". */
    UNREADABLE
  }

  /** The process's host pid. */
  int hostPid();

  /** The process exists and was read consistently (same start time before and after). */
  record Found(ProcessInfo process) implements ProcessRead {
    public Found {
      if (process == null) {
        throw new IllegalArgumentException("process must not be null");
      }
    }

    @Override
    public int hostPid() {
      return process.hostPid();
    }
  }

  /** It exited before or while being read (ENOENT, ESRCH, zombie, or the pid was reused). */
  record Gone(int hostPid) implements ProcessRead {}

  /** It exists but its files cannot be trusted. */
  record Unusable(int hostPid, Problem problem) implements ProcessRead {
    public Unusable {
      if (problem == null) {
        throw new IllegalArgumentException("problem must not be null");
      }
    }
  }
}
