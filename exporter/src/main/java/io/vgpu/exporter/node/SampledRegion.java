package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.MappedFaults;
import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import java.nio.file.Path;
import java.util.Optional;
import java.util.Set;

/** One cache file kept open between the two samples. */
final class SampledRegion {
  final Path path;
  long inode = -1;
  long device = -1;
  RegionFile file;
  Optional<RegionSnapshot> first = Optional.empty();
  Optional<String> error = Optional.empty();
  int semaphoreFirst = -1;

  private SampledRegion(Path path) {
    this.path = path;
  }

  /**
   * Opens through region-codec's safe open; inode and device come from that descriptor, so the file
   * every later verdict (and {@code --expect-inode}) refers to is the one that was read.
   */
  static SampledRegion of(Path path, Set<String> opened) {
    SampledRegion o = new SampledRegion(path);
    try {
      o.file = RegionFile.openReadOnly(path);
      o.inode = o.file.identity().inode();
      o.device = o.file.identity().device();
      if (!opened.add(o.device + ":" + o.inode)) {
        // A hard link to a region already judged: its slots are that region's, counted once.
        o.file.close();
        o.file = null;
        o.error = Optional.of(HARD_LINK);
        return o;
      }
      RegionSnapshot s = o.file.snapshot();
      MappedFaults.deliverPending();
      o.first = Optional.of(s);
      o.semaphoreFirst = o.file.semaphoreValue();
      MappedFaults.deliverPending();
    } catch (RegionException e) {
      o.error =
          Optional.of(
              e.getCause() instanceof InternalError && !o.file.changedOnDisk()
                  ? FAULTED
                  : e.reason().name().toLowerCase(java.util.Locale.ROOT) + ": " + e.getMessage());
    } catch (InternalError e) {
      o.error = Optional.of(FAULTED);
    } catch (RuntimeException e) {
      // A hostile file must cost one region, never the whole report.
      o.error = Optional.of("unreadable: " + e);
    }
    return o;
  }

  static final String HARD_LINK =
      "hard_link: another name of a region already read (each file is judged once)";

  /** A load faulted (SIGBUS) on a file that kept its size. */
  static final String FAULTED = "io_error: " + MappedFaults.LOAD_FAULT;

  NodeEvidence.Region second(boolean resample) {
    Optional<RegionSnapshot> second = first;
    int semaphoreSecond = semaphoreFirst;
    if (resample && file != null) {
      try {
        RegionSnapshot s = file.snapshot();
        MappedFaults.deliverPending();
        second = Optional.of(s);
        semaphoreSecond = file.semaphoreValue();
        MappedFaults.deliverPending();
      } catch (RuntimeException | InternalError e) {
        second = Optional.empty();
        semaphoreSecond = -1;
      }
    }
    return new NodeEvidence.Region(
        path, inode, device, first, second, error, semaphoreFirst, semaphoreSecond);
  }

  void close() {
    if (file != null) {
      file.close();
    }
  }
}
