package io.vgpu.exporter.kubelet;

import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * A GPU device id as a device plugin reports it to the kubelet, parsed into the NVML UUID it names.
 * The forms (docs/pod-resources.md):
 *
 * <ul>
 *   <li>{@code GPU-<uuid>}: a whole GPU (NVIDIA's device plugin);
 *   <li>{@code MIG-<uuid>} or the pre-R470 {@code MIG-GPU-<uuid>/<gi>/<ci>}: a MIG device;
 *   <li>{@code <GPU or MIG id>::<n>}: replica n of a time-sliced or MPS-shared device (NVIDIA);
 *   <li>{@code GPU-<uuid>-<n>}: HAMi's vGPU slot n of a GPU.
 * </ul>
 *
 * <p>The string comes from a device plugin through the kubelet and is treated as untrusted:
 * anything longer than {@link #MAX_LENGTH} or off these shapes is not a GPU id ({@link #parse}
 * answers empty) and is never echoed.
 *
 * @param raw the id as the kubelet sent it
 * @param form which of the shapes above it has
 * @param deviceUuid the UUID NVML reports for the device ({@code GPU-…} or {@code MIG-…})
 * @param replica the replica or vGPU slot number; -1 for {@link Form#GPU} and {@link Form#MIG}
 */
public record DeviceId(String raw, Form form, String deviceUuid, int replica) {
  /** Longer ids are not GPU ids (the longest valid form is 66 characters). */
  public static final int MAX_LENGTH = 96;

  /** The largest replica or slot number accepted (device plugins use small counts). */
  public static final int MAX_REPLICA = 999_999;

  /** How the id names its device. */
  public enum Form {
    GPU,
    MIG,
    /** NVIDIA's {@code ::n}: time-slicing or MPS replica. */
    REPLICA,
    /** HAMi's {@code -n}: a vGPU slot. */
    HAMI_SLOT
  }

  private static final String UUID =
      "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  private static final String BASE =
      "(GPU-" + UUID + "|MIG-" + UUID + "|MIG-GPU-" + UUID + "/\\d{1,3}/\\d{1,3})";
  private static final Pattern PLAIN = Pattern.compile(BASE);
  private static final Pattern REPLICA_ID = Pattern.compile(BASE + "::(\\d{1,6})");
  private static final Pattern HAMI_ID = Pattern.compile("(GPU-" + UUID + ")-(\\d{1,6})");

  public DeviceId {
    Objects.requireNonNull(raw, "raw");
    Objects.requireNonNull(form, "form");
    Objects.requireNonNull(deviceUuid, "deviceUuid");
  }

  /** The id's device, or empty when {@code raw} is not one of the GPU id forms. */
  public static Optional<DeviceId> parse(String raw) {
    if (raw == null || raw.isEmpty() || raw.length() > MAX_LENGTH) {
      return Optional.empty();
    }
    var plain = PLAIN.matcher(raw);
    if (plain.matches()) {
      return Optional.of(new DeviceId(raw, raw.startsWith("GPU-") ? Form.GPU : Form.MIG, raw, -1));
    }
    var replica = REPLICA_ID.matcher(raw);
    if (replica.matches()) {
      return Optional.of(
          new DeviceId(raw, Form.REPLICA, replica.group(1), Integer.parseInt(replica.group(2))));
    }
    var slot = HAMI_ID.matcher(raw);
    if (slot.matches()) {
      return Optional.of(
          new DeviceId(raw, Form.HAMI_SLOT, slot.group(1), Integer.parseInt(slot.group(2))));
    }
    return Optional.empty();
  }

  /** Whether the device is a MIG device (a replica of one included). */
  public boolean mig() {
    return deviceUuid.startsWith("MIG-");
  }
}
