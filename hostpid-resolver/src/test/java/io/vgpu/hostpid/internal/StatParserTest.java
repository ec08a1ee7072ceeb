package io.vgpu.hostpid.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.hostpid.testing.ProcTree;
import org.junit.jupiter.api.Test;

class StatParserTest {

  @Test
  void parse_realLayout_returnsPidStateAndField22() {
    String line =
        "11924 (cat) R 11920 11920 4211 0 -1 4194304 96 0 0 0 0 0 0 0 20 0 1 0 44229 3133440 380"
            + " 18446744073709551615 94145891610624 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";

    StatParser.Stat stat = StatParser.parse(line);

    assertThat(stat).isEqualTo(new StatParser.Stat(11924, 'R', 44229));
  }

  @Test
  void parse_commWithSpacesAndParentheses_splitsAtLastParenthesis() {
    for (String comm : new String[] {"a b", "x) S 1 2 3", "(((", ")))", "a (b) c", "", "t\nu"}) {
      StatParser.Stat stat = StatParser.parse(ProcTree.stat(77, comm, 'S', 123456));

      assertThat(stat).as(comm).isEqualTo(new StatParser.Stat(77, 'S', 123456));
    }
  }

  @Test
  void parse_zombie_reportsExited() {
    assertThat(StatParser.parse(ProcTree.stat(5, "z", 'Z', 9)).exited()).isTrue();
    assertThat(StatParser.parse(ProcTree.stat(5, "z", 'X', 9)).exited()).isTrue();
    assertThat(StatParser.parse(ProcTree.stat(5, "z", 'D', 9)).exited()).isFalse();
  }

  @Test
  void parse_malformed_returnsNull() {
    String[] bad = {
      null,
      "",
      "12",
      "12 (x",
      "(x) S 1 2",
      "x12 (x) S 1",
      "-1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
      "12 (x) S 1 2 3",
      "12 (x)S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
      "12 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
      "12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -19 20",
      "12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 1e3 20",
      "12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 99999999999999999999 20",
      "12 (x) S 1  3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
      "99999999999 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    };
    for (String line : bad) {
      assertThat(StatParser.parse(line)).as(String.valueOf(line)).isNull();
    }
  }

  @Test
  void parse_startTimeAsLastField_isAccepted() {
    assertThat(
            StatParser.parse("12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777")
                .startTimeTicks())
        .isEqualTo(777);
  }
}
