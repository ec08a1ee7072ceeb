package io.vgpu.exporter.kubelet;

import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * One device the kubelet says a container holds.
 *
 * @param namespace the pod's namespace
 * @param pod the pod's name
 * @param container the container's name
 * @param resource the extended resource name ({@code nvidia.com/gpu}, …) or, for a DRA claim, the
 *     driver name
 * @param device the GPU or MIG device, when the id names one (a DRA device names one only when its
 *     device name or a CDI device name is a GPU or MIG id)
 * @param sharing how the container holds it
 * @param migProfile the MIG profile from a mixed-strategy resource name ({@code
 *     nvidia.com/mig-1g.10gb} gives {@code 1g.10gb}); empty where the resource name does not say
 * @param claim for {@link Sharing#DRA}: {@code <claim namespace>/<claim name>}; empty otherwise
 */
public record DeviceAssignment(
    String namespace,
    String pod,
    String container,
    String resource,
    Optional<DeviceId> device,
    Sharing sharing,
    String migProfile,
    String claim) {
  private static final Pattern MIG_RESOURCE =
      Pattern.compile("[a-z0-9.-]{1,63}/mig-([0-9a-z][0-9a-z.+]{0,31})");

  public DeviceAssignment {
    Objects.requireNonNull(namespace, "namespace");
    Objects.requireNonNull(pod, "pod");
    Objects.requireNonNull(container, "container");
    Objects.requireNonNull(resource, "resource");
    Objects.requireNonNull(device, "device");
    Objects.requireNonNull(sharing, "sharing");
    Objects.requireNonNull(migProfile, "migProfile");
    Objects.requireNonNull(claim, "claim");
  }

  /** A device-plugin assignment of a parsed GPU id. */
  static DeviceAssignment plugin(
      String namespace, String pod, String container, String resource, DeviceId id) {
    return new DeviceAssignment(
        namespace,
        pod,
        container,
        resource,
        Optional.of(id),
        Sharing.of(resource, id),
        id.mig() ? migProfile(resource) : "",
        "");
  }

  /** The MIG profile a mixed-strategy resource name carries, or "". */
  static String migProfile(String resource) {
    var m = MIG_RESOURCE.matcher(resource);
    return m.matches() ? m.group(1) : "";
  }

  /** The NVML UUID of the device, when known. */
  public Optional<String> deviceUuid() {
    return device.map(DeviceId::deviceUuid);
  }
}
