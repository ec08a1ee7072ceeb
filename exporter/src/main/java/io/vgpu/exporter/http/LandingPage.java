package io.vgpu.exporter.http;

import io.vgpu.exporter.config.Endpoints;
import io.vgpu.exporter.metrics.ContainerState;
import io.vgpu.exporter.metrics.DeviceUsageSummary;
import io.vgpu.exporter.metrics.NodeState;

/** The plain server-rendered page at {@code /}: containers, usage, links. No scripts. */
public final class LandingPage {
  private LandingPage() {}

  public static String html(NodeState state, Readiness.Verdict verdict, String version) {
    StringBuilder b = new StringBuilder(4096);
    b.append("<!doctype html><html><head><meta charset=\"utf-8\"><title>vgpu-exporter ")
        .append(esc(state.node()))
        .append(
            "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
                + "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
                + ".bad{color:#b00}</style></head><body>")
        .append("<h1>vgpu-exporter on ")
        .append(esc(state.node()))
        .append("</h1><p>Version ")
        .append(esc(version))
        .append(". <a href=\"")
        .append(Endpoints.METRICS)
        .append("\">Metrics</a> &middot; <a href=\"")
        .append(Endpoints.CONTAINERS_API)
        .append("\">JSON API</a> &middot; <a href=\"")
        .append(Endpoints.READYZ)
        .append("\">Readiness</a></p>");
    b.append("<p>Status: ")
        .append(verdict.ready() ? "ready" : "<span class=\"bad\">not ready</span>");
    for (String r : verdict.reasons()) {
      b.append("<br><span class=\"bad\">").append(esc(r)).append("</span>");
    }
    b.append(
        "</p><table id=\"containers\"><tr><th>Namespace</th><th>Pod</th><th>Container</th>"
            + "<th>Pod UID</th><th>Device</th><th>Memory used</th><th>Memory limit</th><th>SM limit</th>"
            + "<th>Processes</th><th>State</th></tr>");
    for (ContainerState c : state.containers()) {
      String st =
          c.stale()
              ? "stale"
              : c.finished() ? "finished" : c.pod().isPresent() ? "running" : "pod unknown";
      if (c.devices().isEmpty()) {
        row(b, c, null, st);
      }
      for (DeviceUsageSummary d : c.devices()) {
        row(b, c, d, st);
      }
    }
    b.append("</table></body></html>");
    return b.toString();
  }

  private static void row(StringBuilder b, ContainerState c, DeviceUsageSummary d, String st) {
    b.append("<tr class=\"container\"><td>")
        .append(esc(c.namespace()))
        .append("</td><td>")
        .append(esc(c.podName()))
        .append("</td><td>")
        .append(esc(c.key().containerName()))
        .append("</td><td>")
        .append(esc(c.key().podUid()))
        .append("</td><td>")
        .append(d == null ? "" : d.index() + " " + esc(d.uuid()))
        .append("</td><td>")
        .append(d == null ? "" : mib(d.usedBytes()))
        .append("</td><td>")
        .append(d == null ? "" : mib(d.limitBytes()))
        .append("</td><td>")
        .append(d == null ? "" : Math.round(d.smLimitRatio() * 100) + "%")
        .append("</td><td>")
        .append(c.running() + c.suspended())
        .append("</td><td>")
        .append(st)
        .append("</td></tr>");
  }

  private static String mib(long bytes) {
    return String.format(java.util.Locale.ROOT, "%.1f MiB", bytes / 1048576.0);
  }

  static String esc(String s) {
    StringBuilder o = new StringBuilder(s.length());
    for (char ch : s.toCharArray()) {
      switch (ch) {
        case '<' -> o.append("&lt;");
        case '>' -> o.append("&gt;");
        case '&' -> o.append("&amp;");
        case '"' -> o.append("&quot;");
        case '\'' -> o.append("&#39;");
        default -> o.append(ch);
      }
    }
    return o.toString();
  }
}
