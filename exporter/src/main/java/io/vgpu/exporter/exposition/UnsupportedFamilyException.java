package io.vgpu.exporter.exposition;

/**
 * Thrown when a snapshot needs something only client_java's writers do (see {@link TextEncoder});
 * the page is then written by client_java instead.
 */
public final class UnsupportedFamilyException extends Exception {
  private static final long serialVersionUID = 1L;

  UnsupportedFamilyException(String why) {
    super(why, null, false, false);
  }
}
