package io.vgpu.regioncodec;

/**
 * The file carries HAMi's magic but its size or version fields match no known layout. Reasons:
 * {@link Reason#UNKNOWN_SIZE}, {@link Reason#UNKNOWN_VERSION}. The message names what was found.
 */
public final class UnsupportedLayoutException extends RegionException {
  private static final long serialVersionUID = 1L;

  private final long fileSize;
  private final long major;
  private final long minor;

  /**
   * Creates the exception.
   *
   * @param major the major version found (unsigned 32-bit), or -1 if it was not read
   * @param minor the minor version found (unsigned 32-bit), or -1 if it was not read
   */
  public UnsupportedLayoutException(
      Reason reason, String message, long fileSize, long major, long minor) {
    super(reason, message, null);
    this.fileSize = fileSize;
    this.major = major;
    this.minor = minor;
  }

  /** The file size that was observed. */
  public long fileSize() {
    return fileSize;
  }

  /** The major version found (unsigned 32-bit), or -1 when the size alone was unknown. */
  public long major() {
    return major;
  }

  /** The minor version found (unsigned 32-bit), or -1 when the size alone was unknown. */
  public long minor() {
    return minor;
  }
}
