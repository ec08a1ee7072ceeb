package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.MappedFaults;
import io.vgpu.exporter.text.TenantText;
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
 * vgpu_exporter_region_writes_total{field}}) and logged; every failed one by reason ({@code
 * vgpu_exporter_region_write_errors_total{reason}}, logged once per change of reason per file, the
 * failing files named in /readyz). A store that faults (SIGBUS: no space for a hole of a sparse
 * file on a full filesystem) is caught where it happens and retried on the next pass only.
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

  /**
   * Reason label of {@code vgpu_exporter_region_write_errors_total} for a store that faulted
   * (SIGBUS) on a file that kept its size; the other reasons are the codec's labels.
   */
  public static final String FAULT = "fault";

  private final Map<Path, RegionFile> open = new HashMap<>();
  private final Map<String, LongAdder> writes = new ConcurrentHashMap<>();
  private final Map<String, LongAdder> errors = new ConcurrentHashMap<>();
  private final Map<Path, String> failing = new ConcurrentHashMap<>();

  public RegionWriteBack() {
    for (String f : new String[] {RECENT_KERNEL, UTILIZATION_SWITCH, HOSTPID}) {
      writes.put(f, new LongAdder());
    }
    errors.put(FAULT, new LongAdder());
    for (RegionException.Reason r : RegionException.Reason.values()) {
      errors.put(r.label(), new LongAdder());
    }
  }

  /** Writes so far by field (every field present, zeros included). */
  public Map<String, Long> writes() {
    Map<String, Long> out = new TreeMap<>();
    writes.forEach((f, n) -> out.put(f, n.sum()));
    return out;
  }

  /**
   * The read-write mapping of {@code path}, opened through region-codec's safe open: no link
   * followed, a single name only (a hard link would carry our writes to another file), and owned by
   * one of {@code owners} when that set is known.
   */
  private RegionFile file(Path path, Set<Integer> owners) {
    RegionFile f = open.get(path);
    if (f != null && f.changedOnDisk()) {
      f.close();
      open.remove(path);
      f = null;
    }
    if (f == null) {
      f = RegionFile.openReadWrite(path, owners);
      open.put(path, f);
    }
    return f;
  }

  /**
   * Applies one feedback decision; false when the file could not be opened or a store failed (then
   * the decision's other field is not tried either; the next feedback pass tries again).
   */
  public boolean apply(FeedbackLoop.Decision d, String who) {
    return apply(d, who, Set.of());
  }

  /**
   * Applies one feedback decision to a region that must belong to one of {@code owners} (empty:
   * owner unknown, only the link count is checked).
   */
  public boolean apply(FeedbackLoop.Decision d, String who, Set<Integer> owners) {
    if (!d.writes()) {
      return true;
    }
    RegionFile f = null;
    try {
      RegionFile file = file(d.region(), owners);
      f = file;
      if (d.recentKernel().isPresent()) {
        int v = d.recentKernel().getAsInt();
        store(() -> file.writer().setRecentKernel(v));
        count(RECENT_KERNEL);
        if (v < 0) {
          LOG.atInfo()
              .setMessage("region write (blocked by higher priority)")
              .addKeyValue("by", who)
              .addKeyValue("recent_kernel", v)
              .addKeyValue("file", d.region())
              .log();
        } else {
          LOG.atDebug()
              .setMessage("region write")
              .addKeyValue("by", who)
              .addKeyValue("recent_kernel", v)
              .addKeyValue("file", d.region())
              .log();
        }
      }
      if (d.utilizationSwitch().isPresent()) {
        int v = d.utilizationSwitch().getAsInt();
        store(() -> file.writer().setUtilizationSwitch(v));
        count(UTILIZATION_SWITCH);
        LOG.atInfo()
            .setMessage("region write")
            .addKeyValue("by", who)
            .addKeyValue("utilization_switch", v)
            .addKeyValue("file", d.region())
            .log();
      }
      succeeded(d.region());
      return true;
    } catch (RegionException e) {
      failed(d.region(), reason(e, f), e.getMessage());
      return false;
    } catch (InternalError e) {
      failed(d.region(), reason(e, f), e.getMessage());
      return false;
    }
  }

  /**
   * Writes {@code hostPid} into the slot that holds {@code pid}, after re-reading the file:
   * HAMi-core compacts slots by copying the last over a dead one, so the index seen earlier may
   * hold another process now.
   *
   * @return true when written, false when the slot moved, already holds it, the file is gone or the
   *     store failed
   */
  public boolean repairHostPid(Path region, int pid, int hostPid, String who) {
    RegionFile f = null;
    try {
      RegionFile file = file(region, Set.of());
      f = file;
      RegionSnapshot now = file.snapshot();
      MappedFaults.deliverPending();
      for (ProcessSlot s : now.processes()) {
        if (s.pid() == pid) {
          if (s.hostPid() == hostPid) {
            return false;
          }
          store(() -> file.writer().setHostPid(s.slotIndex(), hostPid));
          count(HOSTPID);
          succeeded(region);
          LOG.atInfo()
              .setMessage("region write: hostpid repaired")
              .addKeyValue("by", who)
              .addKeyValue("hostpid_was", s.hostPid())
              .addKeyValue("hostpid", hostPid)
              .addKeyValue("pid", pid)
              .addKeyValue("slot", s.slotIndex())
              .addKeyValue("file", region)
              .log();
          return true;
        }
      }
      return false;
    } catch (RegionException e) {
      failed(region, reason(e, f), e.getMessage());
      return false;
    } catch (InternalError e) {
      failed(region, reason(e, f), e.getMessage());
      return false;
    }
  }

  /** One store, with a fault of it delivered here rather than later on this thread. */
  private static void store(Runnable write) {
    write.run();
    MappedFaults.deliverPending();
  }

  /**
   * {@link #FAULT} for a SIGBUS on a file that kept its size (the filesystem could not allocate the
   * page: a hole of a sparse region on a full filesystem), else the codec's reason.
   */
  private static String reason(Throwable e, RegionFile f) {
    boolean fault =
        e instanceof InternalError
            || (e instanceof RegionException && e.getCause() instanceof InternalError);
    if (fault) {
      return f != null && f.changedOnDisk() ? RegionException.Reason.TRUNCATED.label() : FAULT;
    }
    return ((RegionException) e).reason().label();
  }

  private void failed(Path region, String reason, String message) {
    errors.get(reason).increment();
    String before = failing.put(region, reason);
    if (!reason.equals(before)) {
      LOG.atWarn()
          .setMessage("region write failed")
          .addKeyValue("file", TenantText.clean(region))
          .addKeyValue("reason", reason)
          .addKeyValue("retry", "next pass; logged again when the reason changes")
          .addKeyValue(
              "detail",
              FAULT.equals(reason)
                  ? "the store faulted (SIGBUS) although the file kept its size: no space for a"
                      + " not-yet-allocated page of a sparse file (filesystem full?)"
                  : TenantText.clean(message))
          .log();
    }
  }

  private void succeeded(Path region) {
    String before = failing.remove(region);
    if (before != null) {
      LOG.atInfo()
          .setMessage("region writes succeed again")
          .addKeyValue("file", TenantText.clean(region))
          .addKeyValue("was", before)
          .log();
    }
  }

  /** Failed writes so far by reason (every reason present, zeros included). */
  public Map<String, Long> writeErrors() {
    Map<String, Long> out = new TreeMap<>();
    errors.forEach((r, n) -> out.put(r, n.sum()));
    return out;
  }

  /** Regions whose latest write failed, with the reason; any thread. */
  public Map<Path, String> failing() {
    return Map.copyOf(failing);
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
    failing.keySet().retainAll(live);
  }

  /** Number of read-write mappings held. */
  public int mapped() {
    return open.size();
  }

  @Override
  public void close() {
    open.values().forEach(RegionFile::close);
    open.clear();
    failing.clear();
  }
}
