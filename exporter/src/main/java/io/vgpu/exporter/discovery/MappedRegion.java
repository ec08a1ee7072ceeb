package io.vgpu.exporter.discovery;

import io.vgpu.regioncodec.FileIdentity;
import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One mapped cache file, shared between discovery (which owns it) and scrapes (which borrow it).
 * Reference counted so that discovery can retire a mapping while a scrape still reads it: the file
 * is unmapped when the last borrower returns it. Thread-safe.
 */
public final class MappedRegion {
  private static final Logger LOG = LoggerFactory.getLogger(MappedRegion.class);
  private final Path path;
  private final RegionFile file;
  private final FileIdentity identity;
  private final AtomicInteger refs = new AtomicInteger(1);
  private final AtomicBoolean retired = new AtomicBoolean();
  private final AtomicReference<RegionException.Reason> lastReadError = new AtomicReference<>();
  private final ParseErrors errors;
  private final Runnable onClose;

  MappedRegion(Path path, RegionFile file, ParseErrors errors, Runnable onClose) {
    this.path = path;
    this.file = file;
    this.identity = file.identity();
    this.errors = errors;
    this.onClose = onClose;
  }

  public Path path() {
    return path;
  }

  /** The identity seen when the file was mapped. */
  public FileIdentity identity() {
    return identity;
  }

  public boolean retired() {
    return retired.get();
  }

  /**
   * Reads a consistent snapshot, or the reason it cannot. A read error is counted in {@code
   * vgpu_exporter_parse_errors_total} once per change of error state, not once per scrape.
   */
  public Read read() {
    Optional<Read> r = withFile(this::readOpen);
    return r.orElse(new Read.Failed(RegionException.Reason.IO_ERROR));
  }

  private Read readOpen(RegionFile f) {
    RegionSnapshot s;
    try {
      if (f.changedOnDisk()) {
        // Reading a mapping past a truncated end faults; discovery remaps on its next pass.
        return fail(RegionException.Reason.TRUNCATED);
      }
      s = f.snapshot();
      MappedFaults.deliverPending();
    } catch (RegionException e) {
      return e.getCause() instanceof InternalError ? faulted(f) : fail(e.reason());
    } catch (InternalError e) {
      return faulted(f);
    }
    if (lastReadError.getAndSet(null) != null) {
      LOG.atInfo().setMessage("region readable again").addKeyValue("file", path).log();
    }
    if (s.bestEffort()) {
      errors.incrementBestEffortRead();
    }
    return new Read.Ok(s);
  }

  /**
   * A load faulted (SIGBUS). Truncated when the file shrank or was replaced; otherwise the file is
   * intact and the filesystem could not provide a page (a hole of a sparse file on a full tmpfs):
   * an I/O error, retried on the next read without remapping.
   */
  private Read faulted(RegionFile f) {
    if (f.changedOnDisk()) {
      return fail(RegionException.Reason.TRUNCATED);
    }
    RegionException.Reason before = lastReadError.get();
    Read r = fail(RegionException.Reason.IO_ERROR);
    if (before != RegionException.Reason.IO_ERROR) {
      LOG.atWarn()
          .setMessage("region read faulted")
          .addKeyValue("file", path)
          .addKeyValue("reason", "io_error")
          .addKeyValue("detail", MappedFaults.LOAD_FAULT)
          .log();
    }
    return r;
  }

  private Read fail(RegionException.Reason reason) {
    if (lastReadError.getAndSet(reason) != reason) {
      errors.increment(reason);
    }
    return new Read.Failed(reason);
  }

  /**
   * Runs {@code action} on the open file while holding a reference, so it cannot be unmapped
   * underneath. Empty when the mapping is already closed. For the write-back modes.
   */
  public <T> Optional<T> withFile(Function<RegionFile, T> action) {
    if (!tryAcquire()) {
      return Optional.empty();
    }
    try {
      return Optional.ofNullable(action.apply(file));
    } finally {
      release();
    }
  }

  private boolean tryAcquire() {
    while (true) {
      int r = refs.get();
      if (r == 0) {
        return false;
      }
      if (refs.compareAndSet(r, r + 1)) {
        return true;
      }
    }
  }

  private void release() {
    if (refs.decrementAndGet() == 0) {
      file.close();
      onClose.run();
    }
  }

  /** Drops discovery's reference; unmaps now or when the last reader returns. Idempotent. */
  void retire() {
    if (retired.compareAndSet(false, true)) {
      release();
    }
  }

  /** The outcome of one snapshot read. */
  public sealed interface Read {
    record Ok(RegionSnapshot snapshot) implements Read {}

    record Failed(RegionException.Reason reason) implements Read {}
  }
}
