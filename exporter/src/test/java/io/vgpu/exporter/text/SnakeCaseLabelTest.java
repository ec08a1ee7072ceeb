package io.vgpu.exporter.text;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class SnakeCaseLabelTest {
  private enum Reason implements SnakeCaseLabel {
    NOT_IN_A_POD,
    ZERO,
    GPU_NOT_IN_NVML2
  }

  @Test
  void label_isTheConstantsNameInLowerCase_andTheSameObjectEveryCall() {
    assertThat(Reason.NOT_IN_A_POD.label()).isEqualTo("not_in_a_pod");
    assertThat(Reason.ZERO.label()).isEqualTo("zero");
    assertThat(Reason.GPU_NOT_IN_NVML2.label()).isEqualTo("gpu_not_in_nvml2");
    assertThat(Reason.ZERO.label()).isSameAs(Reason.ZERO.label()); // computed once, not per scrape
  }
}
