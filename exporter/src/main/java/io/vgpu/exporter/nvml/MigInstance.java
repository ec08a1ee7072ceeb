package io.vgpu.exporter.nvml;

import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * What makes a MIG device one: its parent GPU, its GPU and compute instance, its profile and the
 * instance's SM activity.
 *
 * @param parentUuid the physical GPU's UUID
 * @param ids the GPU and compute instance ids; empty when NVML did not tell them
 * @param profile the MIG profile, e.g. {@code 1g.10gb} or {@code 1c.2g.20gb}; "" when the device's
 *     name carries none (see {@link #profileOf})
 * @param smActivity the GPU instance's SM activity from GPM, or why it is unknown
 */
public record MigInstance(
    String parentUuid, Optional<MigIds> ids, String profile, SmActivity smActivity) {
  /**
   * A profile as NVIDIA names them: {@code [<c>c.]<g>g.<mem>gb} and optional {@code +me}-style
   * attachments; bounded, so a name cannot smuggle anything else into a label.
   */
  private static final Pattern PROFILE =
      Pattern.compile("(?:[0-9]{1,2}c\\.)?[0-9]{1,2}g\\.[0-9]{1,4}gb(?:\\+[a-z0-9]{1,8}){0,3}");

  public MigInstance {
    Objects.requireNonNull(parentUuid, "parentUuid");
    Objects.requireNonNull(ids, "ids");
    Objects.requireNonNull(profile, "profile");
    Objects.requireNonNull(smActivity, "smActivity");
  }

  /**
   * The profile in a MIG device's name: NVML names a MIG device {@code "<GPU name> MIG <profile>"}
   * (as {@code nvidia-smi -L} shows, e.g. {@code "NVIDIA H100 80GB HBM3 MIG 1g.10gb"}); the text
   * after the last {@code "MIG"} and one blank or underscore, or the whole name, when it is a
   * profile. "" for anything else.
   */
  public static String profileOf(String deviceName) {
    int at = deviceName.lastIndexOf("MIG");
    if (at >= 0 && at + 4 <= deviceName.length()) {
      char sep = deviceName.charAt(at + 3);
      String tail = deviceName.substring(at + 4);
      if ((sep == ' ' || sep == '_') && PROFILE.matcher(tail).matches()) {
        return tail;
      }
    }
    return PROFILE.matcher(deviceName).matches() ? deviceName : "";
  }
}
