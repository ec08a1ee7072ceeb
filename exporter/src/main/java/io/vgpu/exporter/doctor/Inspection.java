package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.LockHolder;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.text.TenantText;
import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * What {@code inspect} shows: per container, each region's header, devices and processes with the
 * recorded host pid, the real host pid (the process of the pod that maps the region and has the
 * slot's pid innermost) and liveness. Pure rendering of {@link NodeEvidence}.
 */
public final class Inspection {
  private Inspection() {}

  /**
   * The JSON document: {@code {"containers": [{"pod_uid", "container", "dir", "regions": [...]}]}}.
   */
  public static Map<String, Object> model(NodeEvidence e) {
    return model(e, Doctor.standard().run(e));
  }

  /** The JSON document with each container's verdict taken from {@code report}. */
  public static Map<String, Object> model(NodeEvidence e, DoctorReport report) {
    List<Object> containers = new ArrayList<>();
    for (NodeEvidence.Container c : e.containers()) {
      Judgment.Container judged = Judgment.container(e, c, report.findings());
      Map<String, Object> cm = new LinkedHashMap<>();
      cm.put("pod_uid", c.key().podUid());
      cm.put("container", c.key().containerName());
      cm.put("dir", c.dir().toString());
      cm.put("verdict", judged.verdict().label());
      cm.put("findings", findings(judged.problems()));
      List<Object> regions = new ArrayList<>();
      for (Judgment.Region r : judged.regions()) {
        regions.add(region(r));
      }
      cm.put("regions", regions);
      containers.add(cm);
    }
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("at", e.now().toString());
    root.put("containers", containers);
    return root;
  }

  /** Findings as JSON objects (for {@code inspect --json} and {@code /api/v1/containers}). */
  public static List<Object> findings(List<Finding> findings) {
    List<Object> out = new ArrayList<>();
    for (Finding f : findings) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("check", f.check());
      m.put("id", f.id());
      m.put("severity", f.severity().label());
      m.put("summary", f.summary());
      m.put("evidence", f.evidence());
      m.put("fix", f.fix());
      out.add(m);
    }
    return out;
  }

  private static Map<String, Object> region(Judgment.Region judged) {
    NodeEvidence.Region r = judged.region();
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("file", r.path().toString());
    if (judged.unreadable().isPresent()) {
      m.put("health", "fail");
      m.put("unreadable_reason", judged.unreadable().get());
      m.put("error", r.error().orElse("unreadable"));
      return m;
    }
    m.put("health", "ok");
    RegionSnapshot s = r.latest().get();
    m.put("layout", s.layout().label());
    Map<String, Object> version = new LinkedHashMap<>();
    version.put("major", s.majorVersion());
    version.put("minor", s.minorVersion());
    m.put("version", s.layout().hasVersionFields() ? version : null);
    m.put("library_version", s.extension().map(x -> x.libVersion()));
    m.put("proc_num", s.rawProcNum());
    m.put("utilization_switch", s.utilizationSwitch());
    m.put("recent_kernel", s.recentKernel());
    m.put("priority", s.priority());
    m.put("last_kernel_time", s.lastKernelTimeEpochSeconds());
    m.put("live_slots", judged.slots().size());
    Map<String, Object> lock = new LinkedHashMap<>();
    Judgment.Lock judgedLock = judged.lock().orElseThrow();
    Optional<LockHolder> holder = judgedLock.holder();
    lock.put("state", judgedLock.state().name().toLowerCase(Locale.ROOT));
    lock.put("holder_pid", holder.map(LockHolder::containerPid));
    lock.put("holder_source", holder.map(LockHolder::source));
    lock.put("holder_alive", holder.map(h -> judgedLock.liveHolder().isPresent()));
    lock.put("held_ms", holder.flatMap(LockHolder::heldFor).map(d -> d.toMillis()));
    m.put("lock", lock);
    List<Object> devices = new ArrayList<>();
    for (DeviceHeader d : s.devices()) {
      Map<String, Object> dm = new LinkedHashMap<>();
      dm.put("index", d.index());
      dm.put("uuid", d.uuid());
      dm.put("memory_limit_bytes", d.memoryLimitBytes());
      dm.put("sm_limit_percent", d.smLimitPercent());
      dm.put("used_bytes", s.usedBytes(d.index()));
      devices.add(dm);
    }
    m.put("devices", devices);
    List<Object> processes = new ArrayList<>();
    for (Judgment.Slot j : judged.slots()) {
      ProcessSlot p = j.slot();
      Optional<NodeEvidence.PodProcess> live = j.process();
      Map<String, Object> pm = new LinkedHashMap<>();
      pm.put("slot", p.slotIndex());
      pm.put("pid", p.pid());
      pm.put("hostpid", p.hostPid());
      pm.put("resolved_host_pid", live.map(NodeEvidence.PodProcess::hostPid));
      pm.put("alive", live.isPresent());
      pm.put("hostpid_correct", live.map(x -> x.hostPid() == p.hostPid()));
      pm.put("fate", j.fate().name());
      pm.put("status", p.status());
      List<Object> usage = new ArrayList<>();
      for (DeviceUsage u : p.devices()) {
        Map<String, Object> um = new LinkedHashMap<>();
        um.put("index", u.deviceIndex());
        um.put("used_bytes", u.totalBytes());
        um.put("context_bytes", u.contextBytes());
        um.put("data_bytes", u.dataBytes());
        um.put("sm_util", u.smUtilPercent());
        usage.add(um);
      }
      pm.put("devices", usage);
      processes.add(pm);
    }
    m.put("processes", processes);
    return m;
  }

  /** Human-readable form. */
  public static String text(NodeEvidence e) {
    return text(e, Doctor.standard().run(e));
  }

  /**
   * Human-readable form: per container its verdict (the doctor's, over the same evidence) on the
   * first line, then each region with its health, lock and slots as {@link Judgment} calls them,
   * then the container's problems.
   */
  public static String text(NodeEvidence e, DoctorReport report) {
    StringBuilder b = new StringBuilder();
    for (NodeEvidence.Container c : e.containers()) {
      Judgment.Container judged = Judgment.container(e, c, report.findings());
      b.append("== pod ")
          .append(TenantText.clean(c.key().podUid()))
          .append(" container ")
          .append(TenantText.clean(c.key().containerName()))
          .append(": ")
          .append(judged.verdict().name())
          .append('\n');
      if (c.regions().isEmpty()) {
        b.append("   no cache file (created at the container's first CUDA call)\n");
      }
      for (Judgment.Region jr : judged.regions()) {
        NodeEvidence.Region r = jr.region();
        b.append("   ").append(TenantText.clean(r.path())).append('\n');
        if (jr.unreadable().isPresent()) {
          b.append("     FAIL unreadable: ")
              .append(TenantText.clean(r.error().orElse(jr.unreadable().get())))
              .append('\n');
          continue;
        }
        RegionSnapshot s = r.latest().get();
        b.append(
            String.format(
                Locale.ROOT,
                "     layout %s, version %s, library %s, %d live slot(s) (proc_num %d)%n",
                s.layout().label(),
                s.layout().hasVersionFields() ? s.majorVersion() + "." + s.minorVersion() : "none",
                TenantText.clean(
                    s.extension().map(x -> x.libVersion()).orElse("HAMi-core (no extension)")),
                jr.slots().size(),
                s.rawProcNum()));
        b.append("     lock: ").append(jr.lock().orElseThrow().describe()).append('\n');
        for (DeviceHeader d : s.devices()) {
          b.append(
              String.format(
                  Locale.ROOT,
                  "     device %d %s: used %d MiB of %s, SM limit %s%n",
                  d.index(),
                  d.uuid().isEmpty() ? "-" : TenantText.clean(d.uuid()),
                  s.usedBytes(d.index()) >> 20,
                  d.memoryLimitBytes() == 0 ? "unlimited" : (d.memoryLimitBytes() >> 20) + " MiB",
                  d.smLimitPercent() == 0 || d.smLimitPercent() >= 100
                      ? "none"
                      : d.smLimitPercent() + "%"));
        }
        for (Judgment.Slot j : jr.slots()) {
          ProcessSlot p = j.slot();
          StringBuilder usage = new StringBuilder();
          for (DeviceUsage u : p.devices()) {
            if (u.totalBytes() != 0 || u.smUtilPercent() != 0) {
              usage.append(
                  String.format(
                      Locale.ROOT,
                      " dev%d=%dMiB/%d%%",
                      u.deviceIndex(),
                      u.totalBytes() >> 20,
                      u.smUtilPercent()));
            }
          }
          b.append(
              String.format(
                  Locale.ROOT,
                  "     slot %-4d pid %-7d hostpid %-7d real %-7s %-9s%s%n",
                  p.slotIndex(),
                  p.pid(),
                  p.hostPid(),
                  j.process().map(x -> Integer.toString(x.hostPid())).orElse("-"),
                  j.word(),
                  usage));
        }
      }
      for (Finding f : judged.problems()) {
        b.append("   ")
            .append(f.severity().name())
            .append(' ')
            .append(f.id())
            .append(": ")
            .append(TenantText.clean(f.summary()))
            .append('\n');
      }
    }
    return b.toString();
  }
}
