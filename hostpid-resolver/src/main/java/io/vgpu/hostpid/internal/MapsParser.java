package io.vgpu.hostpid.internal;

import io.vgpu.hostpid.ProcessMaps;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Reads a process's {@code /proc/<pid>/maps} within a byte bound and keeps the few facts of {@link
 * ProcessMaps} (libvgpu mappings, whether a GPU library is mapped, the inodes of mapped {@code
 * *.cache} regions). A read that stopped at its bound is never complete: the region a process maps
 * may be on the line after the bound.
 */
public final class MapsParser {
  private MapsParser() {}

  /** Parses {@code maps} ("addr perms offset dev inode path"), reading at most {@code maxBytes}. */
  public static ProcessMaps read(Path maps, int maxBytes) {
    // One byte more than the bound tells a file of exactly the bound from a longer one.
    Optional<byte[]> text =
        BoundedReader.readPrefix(maps, maxBytes < Integer.MAX_VALUE ? maxBytes + 1 : maxBytes);
    TreeSet<String> vgpu = new TreeSet<>();
    Set<Long> inodes = new HashSet<>();
    boolean gpu = false;
    boolean complete = text.isPresent() && text.get().length <= maxBytes;
    if (text.isPresent()) {
      byte[] all = text.get();
      // A partial read's last line may be cut anywhere: only whole lines are parsed.
      int length = complete ? all.length : lastNewline(all, maxBytes);
      for (int start = 0; start < length; ) {
        int end = start;
        while (end < length && all[end] != '\n') {
          end++;
        }
        // Most of a CUDA process's maps (thousands of library and anonymous lines) cannot match:
        // only lines whose path's last element names one of these are split into fields. That
        // element lies after the line's last '/' (or is the line, without one), so only that
        // tail is searched, byte by byte: a pass over 400 processes with 100 KB of maps each
        // took ~0.4 s of CPU under C1 with String searches of whole lines.
        int tail = end;
        while (tail > start && all[tail - 1] != '/') {
          tail--;
        }
        String line =
            candidate(all, tail, end)
                ? new String(all, start, end - start, StandardCharsets.ISO_8859_1)
                : null;
        start = end + 1;
        if (line == null) {
          continue;
        }
        String[] f = line.trim().split("\\s+", 6);
        if (f.length < 6) {
          continue;
        }
        String path = f[5];
        String name = path.substring(path.lastIndexOf('/') + 1);
        if (name.contains("libvgpu")) {
          vgpu.add(path + " (" + f[3] + ":" + f[4] + ")");
        } else if (name.startsWith("libcuda.so") || name.startsWith("libnvidia-ml.so")) {
          gpu = true;
        } else if (name.endsWith(".cache")) {
          try {
            inodes.add(Long.parseLong(f[4]));
          } catch (NumberFormatException e) {
            // not a maps line we understand
          }
        }
      }
    }
    return new ProcessMaps(
        List.copyOf(vgpu),
        inodes,
        gpu,
        text.map(b -> b.length).orElse(0),
        text.isPresent(),
        complete);
  }

  /** The end of the last whole line within {@code b[0, limit)}; 0 when there is none. */
  private static int lastNewline(byte[] b, int limit) {
    for (int i = Math.min(limit, b.length) - 1; i >= 0; i--) {
      if (b[i] == '\n') {
        return i;
      }
    }
    return 0;
  }

  private static final byte[] LIBVGPU = ascii("libvgpu");
  private static final byte[] LIBCUDA = ascii("libcuda.so");
  private static final byte[] LIBNVML = ascii("libnvidia-ml.so");
  private static final byte[] CACHE = ascii(".cache");

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  /** Whether {@code b[from, to)} holds one of the names a line is split for. */
  private static boolean candidate(byte[] b, int from, int to) {
    for (int i = from; i < to; i++) {
      byte c = b[i];
      if (c == 'l') {
        if (at(b, i, to, LIBVGPU) || at(b, i, to, LIBCUDA) || at(b, i, to, LIBNVML)) {
          return true;
        }
      } else if (c == '.' && at(b, i, to, CACHE)) {
        return true;
      }
    }
    return false;
  }

  /** Whether {@code what} starts at {@code b[i]} and ends by {@code to}. */
  private static boolean at(byte[] b, int i, int to, byte[] what) {
    if (to - i < what.length) {
      return false;
    }
    for (int k = 1; k < what.length; k++) {
      if (b[i + k] != what[k]) {
        return false;
      }
    }
    return true;
  }
}
