package io.vgpu.exporter.attribution;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.Set;
import java.util.stream.Stream;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The HAMi feedback-loop decisions, as peer-exporters-facts 2.3 / hami-core-facts 6.4 state them.
 */
class FeedbackLoopTest {
  private static final int KEEP = Integer.MIN_VALUE;

  private static FeedbackLoop.Input in(String name, int priority, int rk, int sw, String... uuids) {
    return new FeedbackLoop.Input(Path.of(name), priority, rk, sw, Set.of(uuids));
  }

  /** Expected (recent_kernel, utilization_switch) writes; KEEP = no write. */
  private static int[] want(int rk, int sw) {
    return new int[] {rk, sw};
  }

  static Stream<Arguments> table() {
    return Stream.of(
        Arguments.of(
            "alone and active: decays, runs unthrottled",
            List.of(in("a", 1, 2, 1, "G0")),
            List.of(want(1, 0))),
        Arguments.of(
            "two active at one priority on one GPU: both enforce the limit",
            List.of(in("a", 1, 2, 0, "G0"), in("b", 1, 2, 1, "G0")),
            List.of(want(1, 1), want(1, KEEP))),
        Arguments.of(
            "higher priority active: lower one blocked and limited, higher one free",
            List.of(in("hi", 0, 2, 1, "G0"), in("lo", 1, 2, 0, "G0")),
            List.of(want(1, 0), want(-1, 1))),
        Arguments.of(
            "higher priority active on another GPU: no blocking",
            List.of(in("hi", 0, 2, 0, "G1"), in("lo", 1, 2, 0, "G0")),
            List.of(want(1, KEEP), want(1, KEEP))),
        Arguments.of(
            "contention over: a blocked container is released to 0",
            List.of(in("hi", 0, 1, 0, "G0"), in("lo", 1, -1, 1, "G0")),
            List.of(want(0, KEEP), want(0, 0))),
        Arguments.of(
            "recent_kernel 1 decays to 0: no longer active, blocks nobody",
            List.of(in("hi", 0, 1, 0, "G0"), in("lo", 1, 2, 0, "G0")),
            List.of(want(0, KEEP), want(1, KEEP))),
        Arguments.of(
            "idle higher priority (0): lower one runs",
            List.of(in("hi", 0, 0, 0, "G0"), in("lo", 1, 2, 1, "G0")),
            List.of(want(KEEP, KEEP), want(1, 0))),
        Arguments.of(
            "one of two same-priority containers idle: no contention",
            List.of(in("a", 1, 2, 1, "G0"), in("b", 1, 0, 1, "G0")),
            List.of(want(1, 0), want(KEEP, 0))),
        Arguments.of(
            "multi-GPU container sharing one GPU with a higher priority: blocked",
            List.of(in("hi", 0, 2, 0, "G1"), in("lo", 2, 2, 0, "G0", "G1")),
            List.of(want(1, KEEP), want(-1, 1))),
        Arguments.of(
            "recent_kernel above what libvgpu writes (3): read as 2, so it decays to 1",
            List.of(in("hi", 0, 3, 0, "G1"), in("lo", 2, 2, 0, "G0", "G1")),
            List.of(want(1, KEEP), want(-1, 1))),
        Arguments.of(
            "forged recent_kernel 2147483647: active for one pass only, rewritten to 1",
            List.of(in("evil", 0, Integer.MAX_VALUE, 0, "G0"), in("lo", 1, 2, 0, "G0")),
            List.of(want(1, KEEP), want(-1, 1))),
        Arguments.of(
            "forged priority -2147483648 does not outrank an honest 0: same priority",
            List.of(in("evil", Integer.MIN_VALUE, 2, 0, "G0"), in("hi", 0, 2, 0, "G0")),
            List.of(want(1, 1), want(1, 1))),
        Arguments.of(
            "forged recent_kernel -2147483648 on its own region: released to 0",
            List.of(in("evil", 1, Integer.MIN_VALUE, 0, "G0")),
            List.of(want(0, KEEP))),
        Arguments.of(
            "blocked container stays blocked while the higher one is active",
            List.of(in("hi", 0, 2, 0, "G0"), in("lo", 1, -1, 1, "G0")),
            List.of(want(1, KEEP), want(KEEP, KEEP))),
        Arguments.of(
            "region without device uuids: never counted, never blocked",
            List.of(in("hi", 0, 2, 0, "G0"), in("none", 1, 2, 1)),
            List.of(want(1, KEEP), want(1, 0))));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("table")
  void decide_hamiRules_producesExpectedWrites(
      String name, List<FeedbackLoop.Input> inputs, List<int[]> expected) {
    List<FeedbackLoop.Decision> decisions = FeedbackLoop.decide(inputs);
    assertThat(decisions).hasSameSizeAs(expected);
    for (int i = 0; i < expected.size(); i++) {
      FeedbackLoop.Decision d = decisions.get(i);
      assertThat(d.region()).isEqualTo(inputs.get(i).region());
      assertThat(d.recentKernel()).as(name + " rk #" + i).isEqualTo(opt(expected.get(i)[0]));
      assertThat(d.utilizationSwitch()).as(name + " sw #" + i).isEqualTo(opt(expected.get(i)[1]));
    }
  }

  private static OptionalInt opt(int v) {
    return v == KEEP ? OptionalInt.empty() : OptionalInt.of(v);
  }

  @Property(tries = 500)
  void decide_anyNode_blocksExactlyWhenAHigherPriorityIsActiveOnASharedGpu(
      @ForAll("nodes") List<FeedbackLoop.Input> inputs) {
    List<FeedbackLoop.Decision> decisions = FeedbackLoop.decide(inputs);
    for (int i = 0; i < inputs.size(); i++) {
      FeedbackLoop.Input me = inputs.get(i);
      boolean higherActive = false;
      int myPriority = Math.max(0, me.priority());
      for (FeedbackLoop.Input other : inputs) {
        boolean shares = other.uuids().stream().anyMatch(me.uuids()::contains);
        higherActive |=
            shares
                && Math.max(0, other.priority()) < myPriority
                && Math.clamp(other.recentKernel(), -1, 2) > 1;
      }
      FeedbackLoop.Decision d = decisions.get(i);
      int rk = d.recentKernel().orElse(me.recentKernel());
      assertThat(rk < 0).isEqualTo(higherActive);
      assertThat(d.blocked()).isEqualTo(higherActive);
      assertThat(d.utilizationSwitch().orElse(0)).isBetween(0, 1);
      // Whatever the tenant wrote, what the loop leaves is within what libvgpu writes.
      assertThat(rk).isBetween(-1, 2);
      if (!higherActive && me.recentKernel() > 0) {
        assertThat(rk).isEqualTo(Math.min(me.recentKernel(), 2) - 1);
      }
    }
  }

  @Provide
  Arbitrary<List<FeedbackLoop.Input>> nodes() {
    Arbitrary<FeedbackLoop.Input> one =
        Combinators.combine(
                Arbitraries.oneOf(
                    Arbitraries.integers().between(0, 3),
                    Arbitraries.of(Integer.MIN_VALUE, -1, Integer.MAX_VALUE)),
                Arbitraries.oneOf(
                    Arbitraries.integers().between(-1, 3),
                    Arbitraries.of(Integer.MIN_VALUE, -7, Integer.MAX_VALUE)),
                Arbitraries.integers().between(0, 1),
                Arbitraries.of("G0", "G1", "G2").set().ofMaxSize(3))
            .as((p, rk, sw, uuids) -> new FeedbackLoop.Input(Path.of("x"), p, rk, sw, uuids));
    return one.list().ofMaxSize(8).map(FeedbackLoopTest::named);
  }

  private static List<FeedbackLoop.Input> named(List<FeedbackLoop.Input> in) {
    List<FeedbackLoop.Input> out = new ArrayList<>();
    for (int i = 0; i < in.size(); i++) {
      FeedbackLoop.Input x = in.get(i);
      out.add(
          new FeedbackLoop.Input(
              Path.of("r" + i), x.priority(), x.recentKernel(), x.utilizationSwitch(), x.uuids()));
    }
    return out;
  }
}
