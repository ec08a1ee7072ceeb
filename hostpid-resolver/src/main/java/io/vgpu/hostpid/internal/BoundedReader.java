package io.vgpu.hostpid.internal;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Optional;

/**
 * Reads a small file whole, but never more than a bound, into a Latin-1 string (one char per byte:
 * never throws on non-UTF-8 and keeps every byte, so parsers see exactly what the kernel wrote).
 *
 * <p>procfs files report size 0, so the bound is enforced while reading, not from the size.
 */
public final class BoundedReader {

  /** Outcome kinds; {@link Result#text()} is set only for {@link Outcome#OK}. */
  public enum Outcome {
    OK,
    /** ENOENT or ESRCH: the process is gone. */
    GONE,
    TOO_LARGE,
    /** EACCES, not a regular file, or any other I/O error. */
    UNREADABLE
  }

  /** What a read produced. */
  public record Result(Outcome outcome, String text) {
    static final Result GONE = new Result(Outcome.GONE, null);
    static final Result TOO_LARGE = new Result(Outcome.TOO_LARGE, null);
    static final Result UNREADABLE = new Result(Outcome.UNREADABLE, null);
  }

  private final int maxBytes;
  private final boolean checkRegularFile;
  private final ThreadLocal<ByteBuffer> buffers;

  /**
   * @param maxBytes the most bytes a file may have; one more means {@link Outcome#TOO_LARGE}
   * @param checkRegularFile stat each file before opening it, so a FIFO or device planted in a
   *     non-procfs root cannot block or stream forever; the kernel's procfs needs no such check
   */
  public BoundedReader(int maxBytes, boolean checkRegularFile) {
    if (maxBytes <= 0) {
      throw new IllegalArgumentException("maxBytes must be positive, got " + maxBytes);
    }
    this.maxBytes = maxBytes;
    this.checkRegularFile = checkRegularFile;
    this.buffers = ThreadLocal.withInitial(() -> ByteBuffer.allocateDirect(maxBytes + 1));
  }

  /** Never throws. */
  public Result read(Path file) {
    if (checkRegularFile) {
      try {
        if (!Files.readAttributes(file, BasicFileAttributes.class).isRegularFile()) {
          return Result.UNREADABLE;
        }
      } catch (NoSuchFileException e) {
        return Result.GONE;
      } catch (IOException | RuntimeException e) {
        return Result.UNREADABLE;
      }
    }
    ByteBuffer buffer = buffers.get();
    buffer.clear();
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
      // One read(2) of bound + 1 bytes: procfs's single-record files (stat, status, cgroup) and
      // local regular files return everything up to the count at once, so a short read is the
      // end, and the read that would only return 0 is saved. A full buffer means too large.
      channel.read(buffer);
    } catch (NoSuchFileException e) {
      return Result.GONE;
    } catch (AccessDeniedException e) {
      return Result.UNREADABLE;
    } catch (IOException | RuntimeException e) {
      return isNoSuchProcess(e) ? Result.GONE : Result.UNREADABLE;
    }
    int length = buffer.position();
    if (length > maxBytes) {
      return Result.TOO_LARGE;
    }
    byte[] bytes = new byte[length];
    buffer.get(0, bytes);
    return new Result(Outcome.OK, new String(bytes, StandardCharsets.ISO_8859_1));
  }

  /**
   * Up to {@code max} bytes from the start of {@code file}, read until the end or the bound (files
   * like {@code maps} and {@code environ} that a single read(2) need not return whole); empty when
   * it is missing, unreadable or not a regular file (so a planted FIFO never blocks the read).
   * Never throws.
   */
  public static Optional<byte[]> readPrefix(Path file, int max) {
    try {
      if (!Files.isRegularFile(file)) {
        return Optional.empty();
      }
      try (InputStream in = Files.newInputStream(file)) {
        return Optional.of(in.readNBytes(max));
      }
    } catch (IOException | RuntimeException e) {
      return Optional.empty();
    }
  }

  /** A process that exits while its file is open makes read(2) fail with ESRCH. */
  private static boolean isNoSuchProcess(Exception e) {
    String message = e.getMessage();
    return message != null && message.contains("No such process");
  }
}
