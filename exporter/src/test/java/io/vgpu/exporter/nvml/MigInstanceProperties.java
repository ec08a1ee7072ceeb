package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

/** The MIG profile taken from an NVML device name: only a bounded profile, or nothing. */
class MigInstanceProperties {
  @Test
  void profileOf_namesNvmlGives() {
    assertThat(MigInstance.profileOf("NVIDIA H100 80GB HBM3 MIG 1g.10gb")).isEqualTo("1g.10gb");
    assertThat(MigInstance.profileOf("NVIDIA A100-SXM4-40GB MIG 1c.2g.10gb"))
        .isEqualTo("1c.2g.10gb");
    assertThat(MigInstance.profileOf("NVIDIA H100 MIG 1g.10gb+me")).isEqualTo("1g.10gb+me");
    assertThat(MigInstance.profileOf("3g.40gb")).isEqualTo("3g.40gb");
    assertThat(MigInstance.profileOf("NVIDIA H100 80GB HBM3")).isEmpty();
    assertThat(MigInstance.profileOf("MIG")).isEmpty();
    assertThat(MigInstance.profileOf("NVIDIA MIG 1g.10gb\"}evil")).isEmpty();
    assertThat(MigInstance.profileOf("NVIDIA MIG 1g.10gb MIG")).isEmpty();
  }

  @Property(tries = 300)
  void profileOf_anyName_isEmptyOrABoundedProfile(@ForAll @StringLength(max = 4096) String name) {
    String p = MigInstance.profileOf(name);
    assertThat(p).matches("|([0-9]{1,2}c\\.)?[0-9]{1,2}g\\.[0-9]{1,4}gb(\\+[a-z0-9]{1,8}){0,3}");
    assertThat(p.length()).isLessThanOrEqualTo(44);
  }

  @Property(tries = 300)
  void profileOf_profileAfterAnyPrefix_isFound(
      @ForAll @StringLength(max = 200) String gpuName, @ForAll("profiles") String profile) {
    assertThat(MigInstance.profileOf(gpuName + " MIG " + profile)).isEqualTo(profile);
  }

  @net.jqwik.api.Provide
  net.jqwik.api.Arbitrary<String> profiles() {
    var n = net.jqwik.api.Arbitraries.integers().between(1, 99);
    var mem = net.jqwik.api.Arbitraries.integers().between(1, 9999);
    return net.jqwik.api.Combinators.combine(n, n, mem, net.jqwik.api.Arbitraries.of("", "+me"))
        .as((c, g, m, s) -> (c % 2 == 0 ? c + "c." : "") + g + "g." + m + "gb" + s);
  }
}
