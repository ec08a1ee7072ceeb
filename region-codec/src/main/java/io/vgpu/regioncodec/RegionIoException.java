package io.vgpu.regioncodec;

/**
 * The file could not be opened or read: wrong file type, link, permissions, truncation while
 * mapped, or another I/O failure. Reasons: {@link Reason#NOT_REGULAR_FILE}, {@link Reason#SYMLINK},
 * {@link Reason#TRUNCATED}, {@link Reason#IO_ERROR}, {@link Reason#PERMISSION_DENIED}, and from
 * {@link SafeOpen} also {@link Reason#TOO_LARGE}, {@link Reason#HARD_LINK} and {@link
 * Reason#WRONG_OWNER}.
 */
public final class RegionIoException extends RegionException {
  private static final long serialVersionUID = 1L;

  /** Creates the exception; {@code cause} may be null. */
  public RegionIoException(Reason reason, String message, Throwable cause) {
    super(reason, message, cause);
  }
}
