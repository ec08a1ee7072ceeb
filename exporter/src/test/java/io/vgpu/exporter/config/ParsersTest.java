package io.vgpu.exporter.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Test;

class ParsersTest {
  @Test
  void duration_goSpellings_parse() {
    assertThat(Parsers.duration("500ms")).isEqualTo(Duration.ofMillis(500));
    assertThat(Parsers.duration("1h30m")).isEqualTo(Duration.ofMinutes(90));
    assertThat(Parsers.duration("0")).isZero();
  }

  @Test
  void duration_garbage_isRejected() {
    for (String bad :
        new String[] {"", "5", "5x", "m5", "1h 30m", "-5s", "99999999999999999999s"}) {
      assertThatThrownBy(() -> Parsers.duration(bad))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  @Property(tries = 300)
  void duration_anyString_parsesOrThrowsIllegalArgument(@ForAll String raw) {
    try {
      assertThat(Parsers.duration(raw).isNegative()).isFalse();
    } catch (IllegalArgumentException expected) {
      // the only allowed failure
    }
  }

  @Test
  void host_ipv4Ipv6AndNames_accepted_portsRejected() {
    assertThat(Parsers.host("0.0.0.0")).isEqualTo("0.0.0.0");
    assertThat(Parsers.host("::")).isEqualTo("::");
    assertThat(Parsers.host("localhost")).isEqualTo("localhost");
    assertThatThrownBy(() -> Parsers.host("0.0.0.0:9394 x"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void bool_acceptsCommonSpellings() {
    assertThat(Parsers.bool("TRUE")).isTrue();
    assertThat(Parsers.bool("off")).isFalse();
    assertThatThrownBy(() -> Parsers.bool("maybe")).hasMessageContaining("true or false");
  }
}
