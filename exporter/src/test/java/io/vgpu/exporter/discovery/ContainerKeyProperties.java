package io.vgpu.exporter.discovery;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Locale;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * ContainerKey's written-out equals and hashCode (C1 does not inline a record's generated ones)
 * keep the record's contract: equal exactly when both fields are, the pod UID compared
 * case-insensitively as the constructor lower-cases it, and equal keys hash alike.
 */
class ContainerKeyProperties {
  @Provide
  Arbitrary<String> uids() {
    // A small alphabet with both cases, so equal and case-different UIDs come up often.
    return Arbitraries.strings().withChars("aAbB0-").ofMinLength(1).ofMaxLength(4);
  }

  @Provide
  Arbitrary<String> names() {
    return Arbitraries.strings().withChars("x_y").ofMinLength(1).ofMaxLength(3);
  }

  @Property(tries = 3000)
  void equalsAndHashCode_matchFieldEquality(
      @ForAll("uids") String uid1,
      @ForAll("names") String name1,
      @ForAll("uids") String uid2,
      @ForAll("names") String name2) {
    ContainerKey a = new ContainerKey(uid1, name1);
    ContainerKey b = new ContainerKey(uid2, name2);
    boolean fieldsEqual =
        uid1.toLowerCase(Locale.ROOT).equals(uid2.toLowerCase(Locale.ROOT)) && name1.equals(name2);

    assertThat(a.equals(b)).isEqualTo(fieldsEqual);
    assertThat(b.equals(a)).isEqualTo(fieldsEqual);
    if (fieldsEqual) {
      assertThat(a.hashCode()).isEqualTo(b.hashCode());
    }
  }
}
