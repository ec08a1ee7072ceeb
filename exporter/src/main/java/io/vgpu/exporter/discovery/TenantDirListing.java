package io.vgpu.exporter.discovery;

import java.io.IOException;
import java.nio.file.DirectoryIteratorException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;

/**
 * The one listing of a tenant's {@code <podUID>_<container>} directory that every reader uses
 * (discovery, the evidence pass and through it the status model, {@code doctor}, {@code inspect}
 * and {@code cleanup}): the first {@link #MAX_FILES} {@code *.cache} names and the first {@link
 * #MAX_FILES} {@code *.cache.degraded} names, in name order, and how many of each were left out.
 *
 * <p>The tenant owns the directory, so it may hold any number of entries with names up to 255
 * bytes: the listing streams the directory once and keeps two bounded max-heaps of names, so a
 * directory of 300 000 side files costs one readdir and O(n log 8) comparisons, never a list, set
 * or sort of every name (which ended the exporter at its 48 MiB heap).
 */
public final class TenantDirListing {
  /**
   * At most this many {@code .cache} files (and as many side files) are read per container
   * directory: HAMi's device plugin creates one; restarts and multi-process tools a few.
   */
  public static final int MAX_FILES = 8;

  /** Region files. */
  public static final String CACHE_SUFFIX = ".cache";

  /** libvgpu's side files beside a region ({@code <cache>.degraded}). */
  public static final String SIDE_SUFFIX = CACHE_SUFFIX + DegradedMark.SUFFIX;

  /**
   * One listing.
   *
   * @param cacheFiles the first {@link #MAX_FILES} {@code *.cache} files by name, sorted
   * @param excessCacheFiles {@code *.cache} names left out
   * @param sideFiles the first {@link #MAX_FILES} {@code *.cache.degraded} names, sorted
   * @param excessSideFiles side-file names left out
   * @param complete false when the directory could not be listed to its end (vanished, unreadable)
   */
  public record Listing(
      List<Path> cacheFiles,
      int excessCacheFiles,
      List<String> sideFiles,
      int excessSideFiles,
      boolean complete) {
    public Listing {
      cacheFiles = List.copyOf(cacheFiles);
      sideFiles = List.copyOf(sideFiles);
    }
  }

  private TenantDirListing() {}

  /** Lists {@code dir} once (never follows a link: the caller checked it is a directory). */
  public static Listing of(Path dir) {
    Bounded cache = new Bounded();
    Bounded side = new Bounded();
    boolean complete = true;
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
      for (Path entry : entries) {
        Path name = entry.getFileName();
        if (name == null) {
          continue;
        }
        String n = name.toString();
        if (n.endsWith(CACHE_SUFFIX)) {
          cache.offer(n);
        } else if (n.endsWith(SIDE_SUFFIX)) {
          side.offer(n);
        }
      }
    } catch (IOException | DirectoryIteratorException e) {
      complete =
          false; // vanished or unreadable mid-pass: what was listed stands, next pass settles
    }
    List<Path> files = new ArrayList<>(cache.chosen.size());
    for (String n : cache.sorted()) {
      files.add(dir.resolve(n));
    }
    return new Listing(files, cache.excess, side.sorted(), side.excess, complete);
  }

  /** The first {@link #MAX_FILES} names offered, by name, in a bounded max-heap. */
  private static final class Bounded {
    final PriorityQueue<String> chosen =
        new PriorityQueue<>(MAX_FILES + 1, Comparator.reverseOrder());
    int excess;

    void offer(String name) {
      if (chosen.size() == MAX_FILES) {
        excess++;
        if (name.compareTo(chosen.peek()) >= 0) {
          return;
        }
        chosen.poll();
      }
      chosen.add(name);
    }

    List<String> sorted() {
      List<String> out = new ArrayList<>(chosen);
      out.sort(null);
      return out;
    }
  }
}
