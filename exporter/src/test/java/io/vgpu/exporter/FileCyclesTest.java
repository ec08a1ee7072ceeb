package io.vgpu.exporter;

import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.assertj.core.api.Assertions.assertThat;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.lang.EvaluationResult;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * No cycle between source files in any of the three modules (region-codec, hostpid-resolver,
 * exporter): a file's classes (the top-level one and everything nested in it) form one node, and no
 * file may reach itself again through the files it uses. A cycle means two files that can only be
 * understood, tested and changed together; merge them or move the shared part below both. Generated
 * code (the kubelet's protobuf messages) is left out.
 */
class FileCyclesTest {
  static final String GENERATED = "io.vgpu.kubelet.podresources.v1";

  /**
   * Cycles not yet broken, each file mapped to the file it is counted with. The list only shrinks:
   * {@link #knownCyclesAreStillThere} fails once an entry's cycle is gone, so the entry leaves.
   * JnaNvmlHealth calls back into JnaNvmlClient's bound library (the nvml package is being reworked
   * for MIG devices; the split waits for that).
   */
  static final Map<String, String> KNOWN =
      Map.of("io.vgpu.exporter.nvml.JnaNvmlHealth", "io.vgpu.exporter.nvml.JnaNvmlClient");

  /** One slice per source file: the outermost class a class is nested in. */
  static final SliceAssignment BY_FILE = byFile(Map.of());

  static SliceAssignment byFile(Map<String, String> countedWith) {
    return new SliceAssignment() {
      @Override
      public SliceIdentifier getIdentifierOf(JavaClass javaClass) {
        if (!javaClass.getPackageName().startsWith("io.vgpu.")
            || javaClass.getPackageName().equals(GENERATED)) {
          return SliceIdentifier.ignore();
        }
        JavaClass outer = javaClass;
        while (outer.getEnclosingClass().isPresent()) {
          outer = outer.getEnclosingClass().get();
        }
        return SliceIdentifier.of(countedWith.getOrDefault(outer.getName(), outer.getName()));
      }

      @Override
      public String getDescription() {
        return "source files";
      }
    };
  }

  static JavaClasses mainClasses() {
    return new ClassFileImporter()
        .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
        .importPackages("io.vgpu");
  }

  static ArchRule noFileCycles() {
    return noFileCycles(BY_FILE);
  }

  static ArchRule noFileCycles(SliceAssignment files) {
    return slices().assignedFrom(files).should().beFreeOfCycles();
  }

  @Test
  void noCycleBetweenSourceFiles() {
    JavaClasses classes = mainClasses();
    assertThat(classes.stream().map(JavaClass::getPackageName))
        .as("all three modules imported")
        .contains("io.vgpu.regioncodec", "io.vgpu.hostpid", "io.vgpu.exporter");
    noFileCycles(byFile(KNOWN)).check(classes);
  }

  /** Each known cycle is still a cycle when its files are counted apart. */
  @Test
  void knownCyclesAreStillThere() {
    JavaClasses classes = mainClasses();
    for (Map.Entry<String, String> known : KNOWN.entrySet()) {
      Map<String, String> others = new HashMap<>(KNOWN);
      others.remove(known.getKey());
      EvaluationResult apart = noFileCycles(byFile(others)).evaluate(classes);
      assertThat(String.join("\n", apart.getFailureReport().getDetails()))
          .as("%s is no longer in a cycle: remove it from KNOWN", known.getKey())
          .contains("Slice " + known.getKey() + " ");
    }
  }

  /** The rule finds a cycle planted between two test files, and names both. */
  @Test
  void plantedCycleFails() throws ClassNotFoundException {
    JavaClasses planted =
        new ClassFileImporter()
            .importClasses(
                Class.forName("io.vgpu.exporter.cycles.PlantedCycleA"),
                Class.forName("io.vgpu.exporter.cycles.PlantedCycleB"));
    EvaluationResult result = noFileCycles().evaluate(planted);
    assertThat(result.hasViolation()).isTrue();
    assertThat(String.join("\n", result.getFailureReport().getDetails()))
        .contains("io.vgpu.exporter.cycles.PlantedCycleA")
        .contains("io.vgpu.exporter.cycles.PlantedCycleB");
  }

  /** A one-way chain of files is no cycle. */
  @Test
  void plantedChainPasses() throws ClassNotFoundException {
    JavaClasses chain =
        new ClassFileImporter()
            .importClasses(
                Class.forName("io.vgpu.exporter.cycles.PlantedChainTop"),
                Class.forName("io.vgpu.exporter.cycles.PlantedCycleA"));
    assertThat(noFileCycles().evaluate(chain).hasViolation()).isFalse();
  }
}
