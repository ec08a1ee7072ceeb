package io.vgpu.regioncodec;

/**
 * Why a region file could not be opened or read. The subtypes separate malformed content ({@link
 * RegionFormatException}), well-formed content of a layout this codec does not know ({@link
 * UnsupportedLayoutException}) and file-system trouble ({@link RegionIoException}); {@link
 * #reason()} is a small fixed set meant for metric labels.
 */
public abstract sealed class RegionException extends RuntimeException
    permits RegionFormatException, UnsupportedLayoutException, RegionIoException {
  private static final long serialVersionUID = 1L;

  /** A fixed, small set of causes, safe to use as a metric label value ({@link #label()}). */
  public enum Reason {
    /** A directory, FIFO, socket or device node where a regular file was expected. */
    NOT_REGULAR_FILE,
    /** The path is a symbolic link; region files are never followed through links. */
    SYMLINK,
    /** Shorter than the 12 bytes needed for the magic and version fields. */
    TOO_SMALL,
    /** Larger than {@link RegionFile#MAX_FILE_SIZE}; no known layout is that large. */
    TOO_LARGE,
    /** The first four bytes are not HAMi's magic 19920718. */
    BAD_MAGIC,
    /** The magic is right but the size matches no known layout. */
    UNKNOWN_SIZE,
    /** The size is right but the version fields name a version this codec does not know. */
    UNKNOWN_VERSION,
    /** The file shrank below the mapped length (truncated or replaced while mapped). */
    TRUNCATED,
    /** Any other I/O failure. */
    IO_ERROR,
    /** The process may not open the file. */
    PERMISSION_DENIED,
    /** A file to be written has more than one name: a write would reach the other name's file. */
    HARD_LINK,
    /** A file to be written is not owned by the user expected to own it. */
    WRONG_OWNER,
    /**
     * The region claims more live slots times devices than one snapshot reads ({@link
     * RegionFile#MAX_LIVE_USAGE_ENTRIES}): its cost would grow with what the tenant claims.
     */
    TOO_MANY_LIVE_SLOTS;

    /** The lower-case name, e.g. {@code "bad_magic"}. */
    public String label() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  private final Reason reason;

  RegionException(Reason reason, String message, Throwable cause) {
    super(message, cause);
    this.reason = reason;
  }

  /** The cause category of this failure. */
  public Reason reason() {
    return reason;
  }
}
