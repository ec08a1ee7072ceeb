package io.vgpu.hostpid.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.hostpid.testing.ProcTree;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.NullAndEmptySource;
import org.junit.jupiter.params.provider.ValueSource;

class StatusParserTest {

  @Test
  void parseNsPids_oneToThreeLevels_returnsChainOutermostFirst() {
    assertThat(StatusParser.parseNsPids(ProcTree.status("a", 42))).containsExactly(42);
    assertThat(StatusParser.parseNsPids(ProcTree.status("a", 42, 1))).containsExactly(42, 1);
    assertThat(StatusParser.parseNsPids(ProcTree.status("a", 42, 7, 1))).containsExactly(42, 7, 1);
  }

  @Test
  void parseNsPids_neighbouringLinesWithSimilarNames_areNotConfused() {
    String text = "NStgid:\t9\t9\nNSpgid:\t8\t8\nNSpid:\t10\t3\nNSsid:\t7\n";

    assertThat(StatusParser.parseNsPids(text)).containsExactly(10, 3);
  }

  @Test
  void parseNsPids_spacesInsteadOfTabs_areAccepted() {
    assertThat(StatusParser.parseNsPids("NSpid: 10  3 \n")).containsExactly(10, 3);
  }

  @Test
  void parseNsPids_malformed_returnsNull() {
    String[] bad = {
      null,
      "",
      "Name:\tx\n",
      "NSpid:\n",
      "NSpid:\t\n",
      "NSpid:\t10\t3",
      "NSpid:\t10\tx\n",
      "NSpid:\t10\t0\n",
      "NSpid:\t10\t-3\n",
      "NSpid:\t10\t3\r\n",
      "NSpid:\t10\t99999999999\n",
      "NSpid:\t10\t3\nNSpid:\t10\t3\n",
      " NSpid:\t10\n",
      "NSpid:\t" + "1\t".repeat(StatusParser.MAX_LEVELS + 1) + "\n",
    };
    for (String text : bad) {
      assertThat(StatusParser.parseNsPids(text)).as(String.valueOf(text)).isNull();
    }
  }

  @Test
  void parseNsPids_nameContainingEscapedNewline_doesNotInjectALine() {
    String text = "Name:\tevil\\nNSpid:\t1\nNSpid:\t55\t2\n";

    assertThat(StatusParser.parseNsPids(text)).containsExactly(55, 2);
  }

  @Test
  void parseUids_theFirstUidLine_realEffectiveSavedFilesystem() {
    assertThat(StatusParser.parseUids(ProcTree.status("a", 42, 1))).containsExactly(0, 0, 0, 0);
    assertThat(StatusParser.parseUids("Name:\tx\nUid:\t1000\t1001\t1002\t4294967295\n"))
        .containsExactly(1000, 1001, 1002, -1);
    assertThat(StatusParser.parseUids("Uid:\t5\t5\t5\t5\nUid:\t6\t6\t6\t6\n"))
        .containsExactly(5, 5, 5, 5);
  }

  @ParameterizedTest
  @NullAndEmptySource
  @ValueSource(
      strings = {
        "Name:\tx\n",
        "Uid:\n",
        "Uid:\t0\t0\t0\t0",
        "Uid:\t0\tx\t0\t0\n",
        "Uid:\t0\t-1\t0\t0\n",
        "Uid:\t0\t4294967296\t0\t0\n",
        "Uid:\t0\t0\t0\t0\t0\n",
        " Uid:\t0\n"
      })
  void parseUids_malformed_returnsNull(String text) {
    assertThat(StatusParser.parseUids(text)).isNull();
  }
}
