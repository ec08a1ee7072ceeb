package io.vgpu.exporter.discovery;

import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionFile;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;

/**
 * {@link CacheDiscovery}'s mapping lifecycle: one mapping per cache file, kept while the file stays
 * the same (inode and size), retired and replaced when it is replaced, retired when it goes. A file
 * that could not be mapped keeps its reason; content problems are retried every pass, type problems
 * (symlink, FIFO, huge) only once the file changes. A second name of one mapped file (a hard link)
 * is refused, so each file counts once.
 *
 * <p>Thread-safety: every method but {@link #openMappings()} runs under the discovery's lock (a
 * pass, or close); retired mappings are unmapped once the last reader lets go.
 */
final class FileMappings {
  // The discovery\'s own logger: operators (and tests) find these lines under CacheDiscovery.
  private final Logger log;

  private final boolean writable;
  private final ParseErrors errors;
  private final AtomicInteger openMappings = new AtomicInteger();
  private final Map<Path, FileState> files = new HashMap<>();

  /**
   * @param writable map read-write (only the write-back modes need it)
   * @param errors where open/read failures are counted
   * @param log where its lines go
   */
  FileMappings(boolean writable, ParseErrors errors, Logger log) {
    this.writable = writable;
    this.log = log;
    this.errors = errors;
  }

  /** Mappings not yet unmapped, including retired ones a scrape still reads. */
  int openMappings() {
    return openMappings.get();
  }

  /**
   * The file's mapping for this pass: the one it had when the file is unchanged, else a fresh one
   * (or the reason there is none).
   *
   * @param mappedInodes (device, inode) of every file mapped this pass so far
   */
  DiscoveredFile scanFile(Path file, Set<Object> mappedInodes) {
    BasicFileAttributes attrs = stat(file);
    StatKey now = attrs == null ? null : new StatKey(attrs.fileKey(), attrs.size());
    FileState prev = files.get(file);
    boolean sameFile = prev != null && now != null && now.equals(prev.key());
    boolean secondName =
        attrs != null
            && attrs.isRegularFile()
            && attrs.fileKey() != null
            && !mappedInodes.add(attrs.fileKey());
    if (sameFile
        && !secondName
        && prev.error != RegionException.Reason.HARD_LINK
        && (prev.region != null || !retryable(prev.error))) {
      return prev.asDiscovered(file);
    }
    if (prev != null) {
      prev.retire();
      files.remove(file);
    }
    FileState next;
    if (attrs == null) {
      next = new FileState(null, null, RegionException.Reason.IO_ERROR);
    } else if (attrs.isSymbolicLink()) {
      next = new FileState(now, null, RegionException.Reason.SYMLINK);
    } else if (!attrs.isRegularFile()) {
      next = new FileState(now, null, RegionException.Reason.NOT_REGULAR_FILE);
    } else if (secondName) {
      next = new FileState(now, null, RegionException.Reason.HARD_LINK);
    } else {
      next = open(file, now);
    }
    boolean repeated = sameFile && next.error == prev.error;
    if (next.region == null) {
      if (!repeated) {
        errors.increment(next.error);
        log.atWarn()
            .setMessage("cache file not mapped")
            .addKeyValue("file", file)
            .addKeyValue("reason", next.error.label())
            .log();
      }
    } else {
      log.atDebug()
          .setMessage("mapped")
          .addKeyValue("file", file)
          .addKeyValue("layout", next.region.identity())
          .log();
    }
    files.put(file, next);
    return next.asDiscovered(file);
  }

  /** Retires the mapping of every file the pass did not see. */
  void retireUnseen(Set<Path> seenFiles) {
    for (var it = files.entrySet().iterator(); it.hasNext(); ) {
      var e = it.next();
      if (!seenFiles.contains(e.getKey())) {
        e.getValue().retire();
        it.remove();
      }
    }
  }

  /** Retires every mapping (close). */
  void retireAll() {
    for (FileState s : files.values()) {
      s.retire();
    }
    files.clear();
  }

  /**
   * Content problems can heal in place: libvgpu sizes the file first and writes the magic last, so
   * a pass may see a half-initialized file. Type problems (symlink, FIFO, huge) cannot.
   */
  private static boolean retryable(RegionException.Reason reason) {
    return switch (reason) {
      case SYMLINK, NOT_REGULAR_FILE, TOO_LARGE -> false;
      default -> true;
    };
  }

  private FileState open(Path file, StatKey key) {
    try {
      RegionFile rf = writable ? RegionFile.openReadWrite(file) : RegionFile.openReadOnly(file);
      openMappings.incrementAndGet();
      return new FileState(
          key, new MappedRegion(file, rf, errors, openMappings::decrementAndGet), null);
    } catch (RegionException e) {
      return new FileState(key, null, e.reason());
    } catch (RuntimeException e) {
      log.atDebug()
          .setMessage("open failed")
          .addKeyValue("file", file)
          .addKeyValue("error", e.toString())
          .log();
      return new FileState(key, null, RegionException.Reason.IO_ERROR);
    }
  }

  /** The entry's own attributes (a link is not followed), or null when it cannot be read. */
  static BasicFileAttributes stat(Path p) {
    try {
      return Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
    } catch (NoSuchFileException e) {
      return null;
    } catch (IOException e) {
      return null;
    }
  }

  /** (dev, inode) plus size: a change means the file was replaced or resized. */
  private record StatKey(Object fileKey, long size) {}

  private static final class FileState {
    private final StatKey key;
    private final MappedRegion region;
    private final RegionException.Reason error;

    FileState(StatKey key, MappedRegion region, RegionException.Reason error) {
      this.key = key;
      this.region = region;
      this.error = error;
    }

    StatKey key() {
      return key;
    }

    DiscoveredFile asDiscovered(Path path) {
      return region != null ? DiscoveredFile.mapped(region) : DiscoveredFile.failed(path, error);
    }

    void retire() {
      if (region != null) {
        region.retire();
      }
    }
  }
}
