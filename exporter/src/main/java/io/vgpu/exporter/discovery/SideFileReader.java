package io.vgpu.exporter.discovery;

import java.nio.file.Path;

/**
 * Reads a small file a tenant controls (a libvgpu side file in a container directory) the safe way:
 * never follows a link, never blocks on a FIFO or device, checks the open descriptor (regular file,
 * size bound, exactly one name) and reads at most the bound. One implementation per open primitive,
 * so the reader can move to region-codec's shared safe opener without touching its callers.
 */
public interface SideFileReader {
  /** What a read gave. */
  sealed interface Result {
    /** Nothing at that name (the usual case). */
    record Missing() implements Result {}

    /** Something is there but was not read: a link, FIFO, device, too large, several names... */
    record Refused(String why) implements Result {}

    /** The whole file (at most the bound). */
    @SuppressWarnings("ArrayRecordComponent") // never compared; the caller owns the bytes
    record Content(byte[] bytes) implements Result {}
  }

  /**
   * Reads {@code name} in {@code dir}. Never throws for anything the tenant did.
   *
   * @param dir a directory the exporter found itself (not followed if a link)
   * @param name a single file name in it
   * @param maxBytes larger files are refused unread
   */
  Result read(Path dir, String name, int maxBytes);
}
