package io.vgpu.exporter.http;

import io.vgpu.exporter.doctor.Doctor;
import io.vgpu.exporter.doctor.Finding;
import io.vgpu.exporter.doctor.Severity;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.EvidencePass;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.text.TenantText;
import io.vgpu.hostpid.ProcFs;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The exporter's {@code /} page: plain server-rendered HTML (no scripts, no build step) with the
 * node's containers, their limits, usage, attribution and doctor verdicts, the node-level checks,
 * and links to {@code /metrics} and the JSON API. Thread-safe. In the running exporter it judges
 * the latest {@link EvidencePass} (the same pass whose slot liveness {@code /metrics} renders, so
 * the page and the metrics cannot disagree); built without one, each render gathers fresh evidence
 * (one pass over the regions and the pods' procfs entries, no sampling window).
 */
public final class StatusPage {
  private final ProcFs procFs;
  private final Supplier<NvmlSnapshot> nvml;
  private final InstantSource clock;
  private final Doctor doctor = Doctor.standard();
  private final Optional<EvidencePass> pass;

  /**
   * @param procFs the host's procfs as the running exporter reads it ({@code --path.procfs})
   * @param nvml the running exporter's latest NVML snapshot (its sampler), or a constant "not
   *     sampled" snapshot when NVML is off
   */
  public StatusPage(ProcFs procFs, Supplier<NvmlSnapshot> nvml, InstantSource clock) {
    this.procFs = procFs;
    this.nvml = nvml;
    this.clock = clock;
    this.pass = Optional.empty();
  }

  /**
   * A page that judges the latest pass of {@code pass} (the exporter's background evidence pass,
   * also behind the liveness {@code /metrics} renders) instead of gathering its own evidence.
   */
  public StatusPage(EvidencePass pass, InstantSource clock) {
    this.procFs = null;
    this.nvml = null;
    this.clock = clock;
    this.pass = Optional.of(pass);
  }

  /** The page's data for one exporter state. */
  public StatusModel model(NodeState state, boolean ready, List<String> reasons, String version) {
    return model(state, ready, reasons, version, List.of());
  }

  /**
   * The page's data for one exporter state.
   *
   * @param writes what the exporter writes (readiness notes); empty when it only reads
   */
  public StatusModel model(
      NodeState state, boolean ready, List<String> reasons, String version, List<String> writes) {
    List<Path> dirs = state.containers().stream().map(c -> c.dir().dir()).toList();
    if (pass.isPresent()) {
      NodeEvidence evidence = pass.get().covering(dirs).evidence();
      return StatusModel.of(state, evidence, doctor.run(evidence), ready, reasons, version, writes);
    }
    EvidenceCollector collector =
        new EvidenceCollector(
            procFs,
            nvml,
            () -> Optional.of(state.nodeMeta()).filter(m -> m.known()),
            clock,
            Duration.ZERO,
            d -> {},
            NodeEvidence.Thresholds.defaults());
    NodeEvidence evidence = collector.collect(dirs);
    return StatusModel.of(state, evidence, doctor.run(evidence), ready, reasons, version, writes);
  }

  public String html(NodeState state, boolean ready, List<String> reasons, String version) {
    return render(model(state, ready, reasons, version));
  }

  /** Timestamps as people read them: seconds, UTC, no nanoseconds. */
  static final java.time.format.DateTimeFormatter HUMAN_TIME =
      java.time.format.DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss 'UTC'")
          .withZone(java.time.ZoneOffset.UTC);

  /** Seconds between the page's reloads (a meta refresh: no script, nothing to allow in CSP). */
  public static final int REFRESH_SECONDS = 10;

  /**
   * The page's Content-Security-Policy: nothing but its own inline style may load or run, so a
   * tenant name that slipped past escaping still could not execute or fetch anything.
   */
  public static final String CONTENT_SECURITY_POLICY =
      "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none';"
          + " frame-ancestors 'none'";

  /** Renders a model: problems first, then containers (worst first), GPUs, node checks. */
  public static String render(StatusModel m) {
    StringBuilder b = new StringBuilder(8192);
    b.append("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .append("<meta http-equiv=\"refresh\" content=\"")
        .append(REFRESH_SECONDS)
        .append("\"><title>vgpu-exporter ")
        .append(esc(m.node()))
        .append("</title><style>")
        .append(
            "body{font-family:system-ui,sans-serif;margin:1em;color:#222}table{border-collapse:collapse;margin:.5em 0;max-width:100%}")
        .append(
            "td,th,li,code,p{overflow-wrap:anywhere}.uid{color:#777;font-size:12px}.mem,.nw{white-space:nowrap}")
        .append(
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;font-size:14px}th{background:#f3f3f3}")
        .append(
            ".sev-ok{color:#176f2c}.sev-skip{color:#777}.sev-warn{color:#9a6700;font-weight:bold}.sev-fail{color:#b00;font-weight:bold}")
        .append(
            ".bar{display:inline-block;height:8px;background:#4a7;vertical-align:middle}.over{background:#c33}")
        .append(
            "ul.ev{margin:.2em 0 .2em 1.2em;padding:0;font-size:13px}.fix{font-size:13px;color:#333}")
        .append("</style></head><body>");
    b.append("<h1>vgpu-exporter on ").append(esc(m.node())).append("</h1>");
    b.append("<p>Version ")
        .append(esc(m.version()))
        .append(" &middot; state at <time datetime=\"")
        .append(m.at())
        .append("\">")
        .append(esc(HUMAN_TIME.format(m.at())))
        .append("</time>")
        .append(" &middot; reloads every ")
        .append(REFRESH_SECONDS)
        .append(
            " s &middot; <a href=\"/metrics\">/metrics</a> &middot; <a href=\"/api/v1/containers\">JSON API</a>")
        .append(" &middot; <a href=\"/readyz\">/readyz</a></p>");
    b.append("<p id=\"readiness\">Status: ")
        .append(
            m.ready()
                ? "<span class=\"sev-ok\">ready</span>"
                : "<span class=\"sev-fail\">not ready</span>");
    for (String r : m.notReadyReasons()) {
      b.append("<br><span class=\"sev-fail\">").append(esc(r)).append("</span>");
    }
    b.append("</p>");
    for (String w : m.writes()) {
      b.append("<p class=\"writes\">Writes: ").append(esc(w)).append("</p>");
    }
    Severity worst = m.report().worst();
    b.append("<p id=\"verdict\">Doctor verdict: <span class=\"sev-")
        .append(worst.label())
        .append("\">")
        .append(worst.name())
        .append("</span> (")
        .append(m.report().findings().stream().filter(f -> f.severity() == Severity.FAIL).count())
        .append(" failure(s), ")
        .append(m.report().findings().stream().filter(f -> f.severity() == Severity.WARN).count())
        .append(
            " warning(s)); for a sampled, NVML-backed check run <code>kubectl exec -n NS"
                + " EXPORTER_POD -- vgpu-exporter doctor --problems</code>.</p>");

    gpus(b, m);
    problems(b, m);
    containers(b, m);

    b.append(
        "<h2>Node checks</h2><table id=\"node\"><tr><th>Check</th><th>Verdict</th><th>Summary</th></tr>");
    for (Finding f : m.nodeFindings()) {
      b.append("<tr><td>")
          .append(f.check())
          .append(' ')
          .append(esc(f.id()))
          .append("</td><td class=\"sev-")
          .append(f.severity().label())
          .append("\">")
          .append(f.severity().name())
          .append("</td><td>")
          .append(esc(f.summary()))
          .append("</td></tr>");
    }
    b.append("</table></body></html>\n");
    return b.toString();
  }

  private static void problems(StringBuilder b, StatusModel m) {
    b.append(
        "<h2>Problems</h2><table id=\"doctor\"><tr><th>Check</th><th>Verdict</th><th>Subject</th><th>Finding</th></tr>");
    List<Finding> problems =
        m.report().findings().stream()
            .filter(f -> f.severity() == Severity.WARN || f.severity() == Severity.FAIL)
            .sorted(
                java.util.Comparator.comparingInt((Finding f) -> -f.severity().exitCode())
                    .thenComparingInt(Finding::check)
                    .thenComparing(Finding::subject))
            .toList();
    for (Finding f : problems) {
      b.append("<tr class=\"finding\" data-check=\"")
          .append(esc(f.id()))
          .append("\"><td class=\"nw\">")
          .append(f.check())
          .append(' ')
          .append(esc(f.id()))
          .append("</td><td class=\"sev-")
          .append(f.severity().label())
          .append("\">")
          .append(f.severity().name())
          .append("</td><td title=\"")
          .append(esc(f.subject()))
          .append("\">")
          .append(esc(subjectByName(m, f.subject())))
          .append("</td><td>")
          .append(esc(f.summary()))
          .append("<ul class=\"ev\">");
      for (String e : f.evidence()) {
        b.append("<li>").append(esc(e)).append("</li>");
      }
      b.append("</ul><div class=\"fix\">Fix: ").append(esc(f.fix())).append("</div></td></tr>");
    }
    if (problems.isEmpty()) {
      b.append("<tr><td colspan=\"4\" class=\"sev-ok\">none</td></tr>");
    }
    b.append("</table>");
  }

  private static void containers(StringBuilder b, StatusModel m) {
    b.append(
            "<h2>Containers</h2><table id=\"containers\"><tr><th>Namespace / pod</th><th>Container</th><th>Verdict</th>")
        .append(
            "<th>Device</th><th>Memory used / limit</th><th>SM limit</th><th>SM utilization</th><th>Processes</th><th>State</th></tr>");
    for (StatusModel.Row row : m.containers()) {
      ContainerState c = row.state();
      List<DeviceUsageSummary> devs = row.devices();
      int span = Math.max(1, devs.size());
      for (int i = 0; i < span; i++) {
        DeviceUsageSummary d = devs.isEmpty() ? null : devs.get(i);
        b.append("<tr class=\"container\" data-pod-uid=\"")
            .append(esc(c.key().podUid()))
            .append("\" data-container=\"")
            .append(esc(c.key().containerName()))
            .append("\" data-verdict=\"")
            .append(row.verdict().label())
            .append("\">");
        if (i == 0) {
          b.append("<td rowspan=\"")
              .append(span)
              .append("\" title=\"pod UID ")
              .append(esc(c.key().podUid()))
              .append("\">")
              .append(esc(podName(c)))
              .append("<br><span class=\"uid\">")
              .append(esc(c.key().podUid()))
              .append("</span></td>")
              .append(cell(span, c.key().containerName()));
          b.append("<td rowspan=\"")
              .append(span)
              .append("\" class=\"verdict sev-")
              .append(row.verdict().label())
              .append("\">")
              .append(row.verdict().name());
          for (Finding f : row.findings()) {
            b.append("<br><span class=\"sev-")
                .append(f.severity().label())
                .append("\" data-check=\"")
                .append(esc(f.id()))
                .append("\" data-level=\"")
                .append(f.severity().label())
                .append("\">")
                .append(f.check())
                .append(' ')
                .append(esc(f.id()))
                .append("</span>: ")
                .append(esc(f.summary()));
          }
          b.append("</td>");
        }
        if (d == null) {
          boolean unreadable =
              row.judged().regions().stream().anyMatch(r -> r.unreadable().isPresent());
          b.append("<td colspan=\"4\">")
              .append(
                  unreadable
                      ? "<span class=\"sev-fail\">no readable region (see the verdict)</span>"
                      : c.regions().isEmpty()
                          ? "no cache file yet (created at the first CUDA call)"
                          : "no device in the region")
              .append("</td>");
        } else {
          b.append("<td>")
              .append(d.index())
              .append(' ')
              .append(uuid(d.uuid()))
              .append("</td><td>")
              .append(memory(d))
              .append("</td><td>")
              .append(smLimit(d))
              .append("</td><td class=\"sm-util\">")
              .append(smUtil(row, d))
              .append("</td>");
        }
        if (i == 0) {
          b.append(cell(span, row.judged().processes())).append(cell(span, row.status()));
        }
        b.append("</tr>");
      }
    }
    b.append("</table>");
  }

  private static void gpus(StringBuilder b, StatusModel m) {
    b.append(
        "<h2>Who shares each GPU</h2><table id=\"gpus\"><tr><th>GPU</th><th>Namespace / pod / container</th><th>Memory used / limit</th><th>SM limit</th><th>SM utilization</th><th>Verdict</th></tr>");
    for (StatusModel.Gpu g : m.gpus()) {
      int span = Math.max(1, g.sharers().size());
      StringBuilder head = new StringBuilder();
      head.append("<td rowspan=\"")
          .append(span)
          .append("\">")
          .append(g.index() < 0 ? "" : "GPU " + g.index() + "<br>")
          .append(uuid(g.uuid()));
      if (!g.name().isEmpty()) {
        head.append("<br>").append(esc(g.name()));
      }
      if (g.utilization().isPresent()) {
        head.append(
            String.format(
                Locale.ROOT, "<br>NVML: %.0f%% busy", g.utilization().getAsDouble() * 100));
      }
      head.append("<br>").append(g.sharers().size()).append(" container(s)</td>");
      if (g.sharers().isEmpty()) {
        b.append("<tr class=\"gpu\" data-uuid=\"")
            .append(esc(g.uuid()))
            .append("\">")
            .append(head)
            .append("<td colspan=\"5\">no container region names it</td></tr>");
        continue;
      }
      boolean first = true;
      for (StatusModel.Sharer s : g.sharers()) {
        ContainerState c = s.row().state();
        b.append("<tr class=\"gpu\" data-uuid=\"").append(esc(g.uuid())).append("\">");
        if (first) {
          b.append(head);
          first = false;
        }
        b.append("<td>")
            .append(esc(podName(c)))
            .append(" / ")
            .append(esc(c.key().containerName()))
            .append("</td><td>")
            .append(memory(s.device()))
            .append("</td><td>")
            .append(smLimit(s.device()))
            .append("</td><td class=\"sm-util\">")
            .append(smUtil(s.row(), s.device()))
            .append("</td><td class=\"sev-")
            .append(s.row().verdict().label())
            .append("\">")
            .append(s.row().verdict().name())
            .append("</td></tr>");
      }
    }
    if (m.gpus().isEmpty()) {
      b.append("<tr><td colspan=\"6\">no GPU named by a region or NVML</td></tr>");
    }
    b.append("</table>");
  }

  /**
   * The container's SM utilization on one GPU: what its region reports (the library's own
   * measurement) and, when NVML measured its processes, the driver's number.
   */
  private static String smUtil(StatusModel.Row row, DeviceUsageSummary d) {
    // Each figure on one line of its own: a wrapped "19% (NVML)" made rows three lines high and
    // pushed the GPU table below the first screen at 1024 px.
    String region = "<span class=\"nw\">" + d.regionSmUtilPercent() + "% (region)</span>";
    var nvml = row.nvmlSmUtilization(d.uuid());
    return nvml.isPresent()
        ? String.format(
                Locale.ROOT,
                "<span class=\"nw\">%.0f%% (NVML)</span><br>",
                nvml.getAsDouble() * 100)
            + region
        : region;
  }

  private static String smLimit(DeviceUsageSummary d) {
    return d.smLimitPercent() <= 0 || d.smLimitPercent() >= 100 ? "none" : d.smLimitPercent() + "%";
  }

  private static String cell(int rowspan, String text) {
    return "<td rowspan=\"" + rowspan + "\">" + esc(text) + "</td>";
  }

  /** "1.2 GiB / 4.0 GiB (30 %)" and a bar of that share (red past the limit). */
  private static String memory(DeviceUsageSummary d) {
    String used = bytes(d.usedBytes());
    if (d.limitBytes() <= 0) {
      return "<span class=\"mem\">" + used + " / unlimited</span>";
    }
    long pct = d.usedBytes() * 100 / d.limitBytes();
    return "<span class=\"mem\">"
        + used
        + " / "
        + bytes(d.limitBytes())
        + " ("
        + pct
        + " %)</span><br><span class=\"bar"
        + (d.usedBytes() > d.limitBytes() ? " over" : "")
        + "\" style=\"width:"
        + Math.clamp(pct, 1, 100)
        + "px\"></span>";
  }

  /** MiB below 1 GiB, else GiB with one decimal. */
  static String bytes(long b) {
    return b < (1L << 30)
        ? String.format(Locale.ROOT, "%.0f MiB", b / 1048576.0)
        : String.format(Locale.ROOT, "%.1f GiB", b / (double) (1L << 30));
  }

  /** A GPU UUID short enough not to wrap (the whole one in its title and the row's data-uuid). */
  static String uuid(String u) {
    String shown =
        u.length() > 24 ? u.substring(0, 12) + "\u2026" + u.substring(u.length() - 6) : u;
    return "<span class=\"nw\" title=\"" + esc(u) + "\">" + esc(shown) + "</span>";
  }

  /** "namespace/pod" as people name pods; the pod UID when the API server did not say. */
  static String podName(ContainerState c) {
    if (c.podName().isEmpty()) {
      return "(unknown pod) " + c.key().podUid();
    }
    return (c.namespace().isEmpty() ? "" : c.namespace() + "/") + c.podName();
  }

  /** A finding's subject ("uid_ctr device 0", "pod uid") with the pod's names instead of ids. */
  static String subjectByName(StatusModel m, String subject) {
    for (StatusModel.Row row : m.containers()) {
      ContainerState c = row.state();
      String dir = c.key().dirName();
      if (subject.equals(dir) || subject.startsWith(dir + " ")) {
        return podName(c) + " " + c.key().containerName() + subject.substring(dir.length());
      }
      if (subject.equals(io.vgpu.exporter.doctor.Checks.pod(c.key().podUid()))) {
        return "pod " + podName(c);
      }
    }
    return subject;
  }

  static String esc(String s) {
    StringBuilder o = new StringBuilder(s.length() + 16);
    for (int i = 0; i < s.length(); i++) {
      char ch = s.charAt(i);
      switch (ch) {
        case '<' -> o.append("&lt;");
        case '>' -> o.append("&gt;");
        case '&' -> o.append("&amp;");
        case '"' -> o.append("&quot;");
        case '\'' -> o.append("&#39;");
        // Controls and bidirectional overrides from tenant names would reorder or hide text.
        default -> o.append(TenantText.unsafe(ch, s, i) && ch != '\t' ? '?' : ch);
      }
    }
    return o.toString();
  }
}
