package io.vgpu.exporter.attribution;

import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The only place the exporter writes into shared regions. Each file is mapped read-write on first
 * write (never when no write flag is on: then this class is not even created), remapped when the
 * file is replaced, unmapped when it disappears. Every write is counted by field ({@code
 * vgpu_exporter_region_writes_total{field}}) and logged.
 *
 * <p>Writes are single aligned stores through region-codec's {@link
 * io.vgpu.regioncodec.RegionWriter}; like HAMi's monitor, they race benignly with libvgpu (a launch
 * may set {@code recent_kernel = 2} just before the decrement lands).
 *
 * <p>Not thread safe: owned by the attribution thread. {@link #writes()} may be read from any
 * thread.
 */
public final class RegionWriteBack implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RegionWriteBack.class);

  /** Field label values of {@code vgpu_exporter_region_writes_total}. */
  public static final String RECENT_KERNEL = "recent_kernel";

  public static final String UTILIZATION_SWITCH = "utilization_switch";
  public static final String HOSTPID = "hostpid";

  private final Map<Path, RegionFile> open = new HashMap<>();
  private final Map<String, LongAdder> writes = new ConcurrentHashMap<>();

  public RegionWriteBack() {
    for (String f : new String[] {RECENT_KERNEL, UTILIZATION_SWITCH, HOSTPID}) {
      writes.put(f, new LongAdder());
    }
  }

  /** Writes so far by field (every field present, zeros included). */
  public Map<String, Long> writes() {
    Map<String, Long> out = new TreeMap<>();
    writes.forEach((f, n) -> out.put(f, n.sum()));
    return out;
  }

  private RegionFile file(Path path) {
    RegionFile f = open.get(path);
    if (f != null && f.changedOnDisk()) {
      f.close();
      open.remove(path);
      f = null;
    }
    if (f == null) {
      f = RegionFile.openReadWrite(path);
      open.put(path, f);
    }
    return f;
  }

  /** Applies one feedback decision; false when the file could not be opened. */
  public boolean apply(FeedbackLoop.Decision d, String who) {
    if (!d.writes()) {
      return true;
    }
    try {
      RegionFile f = file(d.region());
      d.recentKernel()
          .ifPresent(
              v -> {
                f.writer().setRecentKernel(v);
                count(RECENT_KERNEL);
                if (v < 0) {
                  LOG.info(
                      "region write {} recent_kernel={} (blocked by higher priority): {}",
                      who,
                      v,
                      d.region());
                } else {
                  LOG.debug("region write {} recent_kernel={}: {}", who, v, d.region());
                }
              });
      d.utilizationSwitch()
          .ifPresent(
              v -> {
                f.writer().setUtilizationSwitch(v);
                count(UTILIZATION_SWITCH);
                LOG.info("region write {} utilization_switch={}: {}", who, v, d.region());
              });
      return true;
    } catch (RegionException e) {
      LOG.warn("cannot write {}: {}", d.region(), e.getMessage());
      return false;
    }
  }

  /**
   * Writes {@code hostPid} into the slot that holds {@code pid}, after re-reading the file:
   * HAMi-core compacts slots by copying the last over a dead one, so the index seen earlier may
   * hold another process now.
   *
   * @return true when written, false when the slot moved, already holds it, or the file is gone
   */
  public boolean repairHostPid(Path region, int pid, int hostPid, String who) {
    try {
      RegionFile f = file(region);
      RegionSnapshot now = f.snapshot();
      for (ProcessSlot s : now.processes()) {
        if (s.pid() == pid) {
          if (s.hostPid() == hostPid) {
            return false;
          }
          f.writer().setHostPid(s.slotIndex(), hostPid);
          count(HOSTPID);
          LOG.info(
              "region write {} hostpid {} -> {} for pid {} (slot {}): {}",
              who,
              s.hostPid(),
              hostPid,
              pid,
              s.slotIndex(),
              region);
          return true;
        }
      }
      return false;
    } catch (RegionException e) {
      LOG.warn("cannot repair hostpid in {}: {}", region, e.getMessage());
      return false;
    }
  }

  private void count(String field) {
    writes.get(field).increment();
  }

  /** Unmaps files that are no longer among {@code live}. */
  public void retainOnly(Set<Path> live) {
    Iterator<Map.Entry<Path, RegionFile>> it = open.entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry<Path, RegionFile> e = it.next();
      if (!live.contains(e.getKey())) {
        e.getValue().close();
        it.remove();
      }
    }
  }

  /** Number of read-write mappings held. */
  public int mapped() {
    return open.size();
  }

  @Override
  public void close() {
    open.values().forEach(RegionFile::close);
    open.clear();
  }
}
