package io.vgpu.regioncodec;

/**
 * The bytes are not a region file: too small, too large or without HAMi's magic. Reasons: {@link
 * Reason#TOO_SMALL}, {@link Reason#TOO_LARGE}, {@link Reason#BAD_MAGIC}.
 */
public final class RegionFormatException extends RegionException {
  private static final long serialVersionUID = 1L;

  private final long fileSize;

  /** Creates the exception; {@code fileSize} is the size that was observed. */
  public RegionFormatException(Reason reason, String message, long fileSize) {
    super(reason, message, null);
    this.fileSize = fileSize;
  }

  /** The file size that was observed. */
  public long fileSize() {
    return fileSize;
  }
}
