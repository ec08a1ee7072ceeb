package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * The device identity a container's series carry. A region's uuids are the tenant's bytes:
 * rewritten before every scrape they would mint fresh series each time (Prometheus keeps each for
 * hours). So the label is NVML's: a region uuid NVML reports on this node is kept; one it does not
 * is replaced by the uuid of NVML's device at that index (empty past NVML's devices) and counted as
 * {@code not_on_node}. With NVML down, a region uuid is used only when it has GPU uuid syntax
 * ({@code invalid_syntax} otherwise) and while the container has changed its uuids at most {@link
 * #MAX_CHANGES_PER_CONTAINER} times ({@code churn}: the last accepted one is kept). So a container
 * can add at most that many identities to the series, whatever it writes. Thread-safe.
 */
public final class DeviceIdentities {
  /** Why a region's uuid was not used as the label. */
  public static final String NOT_ON_NODE = "not_on_node";

  public static final String INVALID_SYNTAX = "invalid_syntax";
  public static final String CHURN = "churn";

  /** Uuid changes one container may make while NVML is down before its labels are pinned. */
  public static final int MAX_CHANGES_PER_CONTAINER = 4;

  private static final Pattern GPU_UUID =
      Pattern.compile(
          "(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");

  /** A label and, when the region's uuid was not used, why. */
  public record Identity(String uuid, String rejected) {
    public Identity {
      Objects.requireNonNull(uuid, "uuid");
    }

    public boolean confirmed() {
      return rejected == null;
    }
  }

  private final Supplier<NvmlSnapshot> nvml;
  private final Map<ContainerKey, Accepted> accepted = new HashMap<>();

  /** Identities as NVML reports them ({@code nvml} is read once per {@link #view()}). */
  public DeviceIdentities(Supplier<NvmlSnapshot> nvml) {
    this.nvml = Objects.requireNonNull(nvml, "nvml");
  }

  /** Without NVML: region uuids by syntax and churn only. */
  public static DeviceIdentities withoutNvml() {
    return new DeviceIdentities(() -> null);
  }

  /** One scrape's view: NVML's devices read once. */
  public View view() {
    NvmlSnapshot s = nvml.get();
    if (s == null || !s.status().up() || s.gpus().isEmpty()) {
      return new View(null, null);
    }
    Set<String> uuids = new HashSet<>();
    Map<Integer, String> byIndex = new HashMap<>();
    for (GpuSnapshot g : s.gpus()) {
      uuids.add(g.identity().uuid());
      byIndex.put(g.identity().index(), g.identity().uuid());
    }
    return new View(uuids, byIndex);
  }

  /** Forgets containers no longer on the node (their accepted uuids and change counts). */
  public synchronized void retainOnly(Set<ContainerKey> live) {
    accepted.keySet().retainAll(live);
  }

  /** Labels for one scrape. */
  public final class View {
    private final Set<String> nvmlUuids;
    private final Map<Integer, String> nvmlByIndex;

    private View(Set<String> nvmlUuids, Map<Integer, String> nvmlByIndex) {
      this.nvmlUuids = nvmlUuids;
      this.nvmlByIndex = nvmlByIndex;
    }

    /** The label of device {@code index} of {@code key}, whose region says {@code claimed}. */
    public Identity of(ContainerKey key, int index, String claimed) {
      if (nvmlUuids != null) {
        if (nvmlUuids.contains(claimed)) {
          return new Identity(claimed, null);
        }
        return new Identity(nvmlByIndex.getOrDefault(index, ""), NOT_ON_NODE);
      }
      if (claimed.isEmpty()) {
        return new Identity("", null); // the region names no device: nothing minted
      }
      if (!GPU_UUID.matcher(claimed).matches()) {
        return new Identity("", INVALID_SYNTAX);
      }
      synchronized (DeviceIdentities.this) {
        Accepted a = accepted.computeIfAbsent(key, k -> new Accepted());
        String before = a.byIndex.get(index);
        if (claimed.equals(before)) {
          return new Identity(claimed, null);
        }
        if (before != null && a.changes >= MAX_CHANGES_PER_CONTAINER) {
          return new Identity(before, CHURN);
        }
        if (before != null) {
          a.changes++;
        }
        a.byIndex.put(index, claimed);
        return new Identity(claimed, null);
      }
    }
  }

  private static final class Accepted {
    final Map<Integer, String> byIndex = new HashMap<>();
    int changes;
  }
}
