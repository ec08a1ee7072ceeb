package io.vgpu.exporter.cli;

import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.text.TenantText;
import java.util.ArrayList;
import java.util.List;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * What {@code cleanup --apply} and {@code unlock --apply} say about each shrreg-tool run, in words:
 * the slots freed or the lock released (from the tool's JSON, not the JSON itself), the tool's
 * error otherwise, and how to get the tool when it could not be started.
 */
final class RepairOutput {
  private static final JsonMapper JSON = JsonMapper.builder().build();

  private RepairOutput() {}

  static List<String> lines(RepairPlan.Outcome o) {
    List<String> out = new ArrayList<>();
    if (o.exitCode() == 0) {
      JsonNode doc = parse(o.output());
      if (doc != null && doc.has("dropped")) {
        for (JsonNode d : doc.get("dropped")) {
          out.add(
              "freed slot %d: pid %d (host pid %d) %s, held %d MiB"
                  .formatted(
                      d.path("slot").asInt(),
                      d.path("pid").asInt(),
                      d.path("hostpid").asInt(),
                      TenantText.clean(d.path("reason").asString("")),
                      d.path("used_bytes").asLong() >> 20));
        }
        out.add(
            "done: %d slot(s) freed, slot table now %d entries"
                .formatted(doc.get("dropped").size(), doc.path("proc_num").asInt()));
        return out;
      }
      if (doc != null && doc.has("result")) {
        out.add("done: " + TenantText.clean(doc.get("result").asString("")));
        return out;
      }
      out.add("done");
      return out;
    }
    String head = "failed (exit " + o.exitCode() + ")";
    out.add(o.meaning().isEmpty() ? head : head + ": " + o.meaning());
    o.output().lines().map(TenantText::clean).map(l -> "  " + l).forEach(out::add);
    if (o.exitCode() == -1 && o.output().startsWith("cannot run ")) {
      out.add(
          "  hint: --apply runs shrreg-tool; put it on PATH or pass --shrreg-tool PATH (make"
              + " libvgpu builds libvgpu/build/shrreg-tool; the image has it on PATH)");
    }
    return out;
  }

  private static JsonNode parse(String s) {
    try {
      return s.isBlank() ? null : JSON.readTree(s);
    } catch (JacksonException e) {
      return null;
    }
  }
}
