package io.vgpu.exporter.kubelet;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HexFormat;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.StringLength;

/** The device-id parser on every id form and on arbitrary (hostile) strings. */
class DeviceIdProperties {

  @Provide
  Arbitrary<String> uuids() {
    return Arbitraries.bytes()
        .array(byte[].class)
        .ofSize(16)
        .map(
            b -> {
              String h = HexFormat.of().formatHex(b);
              return h.substring(0, 8)
                  + "-"
                  + h.substring(8, 12)
                  + "-"
                  + h.substring(12, 16)
                  + "-"
                  + h.substring(16, 20)
                  + "-"
                  + h.substring(20);
            });
  }

  @Property(tries = 300)
  void wholeGpuIdsNameTheirGpu(@ForAll("uuids") String uuid) {
    var id = DeviceId.parse("GPU-" + uuid).orElseThrow();
    assertThat(id.form()).isEqualTo(DeviceId.Form.GPU);
    assertThat(id.deviceUuid()).isEqualTo("GPU-" + uuid);
    assertThat(id.replica()).isEqualTo(-1);
    assertThat(id.mig()).isFalse();
  }

  @Property(tries = 300)
  void migIdsNameTheirMigDevice(
      @ForAll("uuids") String uuid,
      @ForAll @IntRange(max = 999) int gi,
      @ForAll @IntRange(max = 999) int ci) {
    for (String raw : new String[] {"MIG-" + uuid, "MIG-GPU-" + uuid + "/" + gi + "/" + ci}) {
      var id = DeviceId.parse(raw).orElseThrow();
      assertThat(id.form()).isEqualTo(DeviceId.Form.MIG);
      assertThat(id.deviceUuid()).isEqualTo(raw);
      assertThat(id.mig()).isTrue();
    }
  }

  @Property(tries = 300)
  void replicasAndSlotsNameTheDeviceAndTheirNumber(
      @ForAll("uuids") String uuid, @ForAll @IntRange(max = DeviceId.MAX_REPLICA) int n) {
    var replica = DeviceId.parse("GPU-" + uuid + "::" + n).orElseThrow();
    assertThat(replica.form()).isEqualTo(DeviceId.Form.REPLICA);
    assertThat(replica.deviceUuid()).isEqualTo("GPU-" + uuid);
    assertThat(replica.replica()).isEqualTo(n);
    var migReplica = DeviceId.parse("MIG-" + uuid + "::" + n).orElseThrow();
    assertThat(migReplica.deviceUuid()).isEqualTo("MIG-" + uuid);
    assertThat(migReplica.mig()).isTrue();
    var slot = DeviceId.parse("GPU-" + uuid + "-" + n).orElseThrow();
    assertThat(slot.form()).isEqualTo(DeviceId.Form.HAMI_SLOT);
    assertThat(slot.deviceUuid()).isEqualTo("GPU-" + uuid);
    assertThat(slot.replica()).isEqualTo(n);
  }

  @Property(tries = 300)
  void replicaNumbersPastTheBoundAreNotIds(@ForAll("uuids") String uuid) {
    assertThat(DeviceId.parse("GPU-" + uuid + "::" + (DeviceId.MAX_REPLICA + 1))).isEmpty();
    assertThat(DeviceId.parse("GPU-" + uuid + "-" + (DeviceId.MAX_REPLICA + 1))).isEmpty();
    assertThat(DeviceId.parse("GPU-" + uuid + "::")).isEmpty();
    assertThat(DeviceId.parse("GPU-" + uuid + "::-1")).isEmpty();
  }

  /** Whatever the string, parse answers (no exception) and a match lies inside it. */
  @Property(tries = 2000)
  void arbitraryStringsNeverThrowAndMatchesAreSubstrings(
      @ForAll @StringLength(max = 200) String s) {
    DeviceId.parse(s)
        .ifPresent(
            id -> {
              assertThat(s).hasSizeLessThanOrEqualTo(DeviceId.MAX_LENGTH);
              assertThat(s).startsWith(id.deviceUuid());
              assertThat(id.deviceUuid()).matches("(GPU|MIG)-[-0-9a-fA-F/GPU]+");
            });
  }

  /** Mutating one character of a valid id yields an id of a valid form or none, never garbage. */
  @Property(tries = 2000)
  void mutatedIdsParseOnlyToWellFormedIds(
      @ForAll("ids") String valid, @ForAll @IntRange(max = 80) int at, @ForAll char c) {
    int i = Math.min(at, valid.length() - 1);
    String mutated = valid.substring(0, i) + c + valid.substring(i + 1);
    DeviceId.parse(mutated)
        .ifPresent(
            id -> {
              assertThat(id.raw()).isEqualTo(mutated);
              assertThat(DeviceId.parse(id.deviceUuid())).isPresent();
              assertThat(id.deviceUuid()).doesNotContain("::");
            });
  }

  @Provide
  Arbitrary<String> ids() {
    Arbitrary<String> uuid = uuids();
    Arbitrary<Integer> n = Arbitraries.integers().between(0, 99);
    return Combinators.combine(uuid, n, Arbitraries.integers().between(0, 4))
        .as(
            (u, k, form) ->
                switch (form) {
                  case 0 -> "GPU-" + u;
                  case 1 -> "MIG-" + u;
                  case 2 -> "GPU-" + u + "::" + k;
                  case 3 -> "GPU-" + u + "-" + k;
                  default -> "MIG-GPU-" + u + "/" + k + "/0";
                });
  }

  @Example
  void lengthBoundIsExact() {
    String longest = "MIG-GPU-00000000-0000-0000-0000-000000000000/999/999::999999";
    assertThat(longest.length()).isLessThanOrEqualTo(DeviceId.MAX_LENGTH);
    assertThat(DeviceId.parse(longest)).isPresent();
    assertThat(DeviceId.parse("x".repeat(DeviceId.MAX_LENGTH + 1))).isEmpty();
    assertThat(DeviceId.parse("")).isEmpty();
    assertThat(DeviceId.parse(null)).isEmpty();
    assertThat(DeviceId.parse("GPU-0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0")).isPresent();
    assertThat(DeviceId.parse(" GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")).isEmpty();
    assertThat(DeviceId.parse("GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\n")).isEmpty();
  }

  @Example
  void sharingAndMigProfileFollowTheResourceName() {
    String gpu = "GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    String mig = "MIG-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    assertThat(
            DeviceAssignment.plugin(
                    "n", "p", "c", "nvidia.com/mig-3g.40gb", DeviceId.parse(mig).orElseThrow())
                .migProfile())
        .isEqualTo("3g.40gb");
    assertThat(
            DeviceAssignment.plugin(
                    "n", "p", "c", "nvidia.com/gpu", DeviceId.parse(mig).orElseThrow())
                .migProfile())
        .isEmpty();
    assertThat(
            DeviceAssignment.plugin(
                    "n", "p", "c", "nvidia.com/mig-1g.5gb", DeviceId.parse(gpu).orElseThrow())
                .migProfile())
        .as("a GPU id under a MIG name has no profile")
        .isEmpty();
    assertThat(DeviceAssignment.migProfile("nvidia.com/mig-" + "9".repeat(40))).isEmpty();
  }

  @Property(tries = 200)
  void stringsOfValidLengthButNoGpuPrefixAreNotIds(
      @ForAll @StringLength(min = 1, max = 96) String s) {
    if (!s.startsWith("GPU-") && !s.startsWith("MIG-")) {
      assertThat(DeviceId.parse(s)).isEmpty();
    }
  }
}
