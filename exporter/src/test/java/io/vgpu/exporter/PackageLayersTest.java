package io.vgpu.exporter;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAnyPackage;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.simpleName;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.fields;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noFields;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.assertj.core.api.Assertions.assertThat;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The exporter's rooms and what each may import (README: Architecture), checked on the compiled
 * main classes so the shape cannot erode silently:
 *
 * <pre>
 * Main → cli → app wiring (io.vgpu.exporter) → {http, metrics} → {doctor, attribution, node}
 *      → {discovery, nvml, k8s, kubelet, config, exposition, loops, text, demo}
 * </pre>
 *
 * Any layer may import any layer below it; nothing imports upwards. Inside the middle group doctor
 * may import attribution and node, attribution may import node, node imports neither; http may
 * import metrics, not the reverse. No two packages depend on each other in a cycle.
 */
class PackageLayersTest {
  private static final String ROOT = "io.vgpu.exporter";
  private static final String[] BOTTOM = {
    ROOT + ".discovery..",
    ROOT + ".nvml..",
    ROOT + ".k8s..",
    ROOT + ".kubelet..",
    ROOT + ".config..",
    ROOT + ".exposition..",
    ROOT + ".loops..",
    ROOT + ".text..",
    ROOT + ".demo.."
  };

  private static JavaClasses classes;

  @BeforeAll
  static void importMainClasses() {
    classes =
        new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages(ROOT);
  }

  /** The layers of the map; every main class of the exporter belongs to exactly one. */
  static ArchRule layers() {
    return layeredArchitecture()
        .consideringOnlyDependenciesInLayers()
        .ensureAllClassesAreContainedInArchitectureIgnoring(not(resideInAPackage(ROOT + "..")))
        .layer("Main")
        .definedBy(resideInAPackage(ROOT).and(simpleName("Main")))
        .layer("Cli")
        .definedBy(ROOT + ".cli..")
        .layer("App")
        .definedBy(resideInAPackage(ROOT).and(not(simpleName("Main"))))
        .layer("Http")
        .definedBy(ROOT + ".http..")
        .layer("Metrics")
        .definedBy(ROOT + ".metrics..")
        .layer("Doctor")
        .definedBy(ROOT + ".doctor..")
        .layer("Attribution")
        .definedBy(ROOT + ".attribution..")
        .layer("Node")
        .definedBy(ROOT + ".node..")
        .layer("Bottom")
        .definedBy(resideInAnyPackage(BOTTOM))
        .whereLayer("Main")
        .mayNotBeAccessedByAnyLayer()
        .whereLayer("Cli")
        .mayOnlyBeAccessedByLayers("Main")
        .whereLayer("App")
        .mayOnlyBeAccessedByLayers("Main", "Cli")
        .whereLayer("Http")
        .mayOnlyBeAccessedByLayers("Main", "Cli", "App")
        .whereLayer("Metrics")
        .mayOnlyBeAccessedByLayers("Main", "Cli", "App", "Http")
        .whereLayer("Doctor")
        .mayOnlyBeAccessedByLayers("Main", "Cli", "App", "Http", "Metrics")
        .whereLayer("Attribution")
        .mayOnlyBeAccessedByLayers("Main", "Cli", "App", "Http", "Metrics", "Doctor")
        .whereLayer("Node")
        .mayOnlyBeAccessedByLayers("Main", "Cli", "App", "Http", "Metrics", "Doctor", "Attribution")
        .whereLayer("Bottom")
        .mayOnlyBeAccessedByLayers(
            "Main", "Cli", "App", "Http", "Metrics", "Doctor", "Attribution", "Node");
  }

  @Test
  void importsOnlyRunDownTheLayers() {
    assertThat(classes).as("main classes imported").hasSizeGreaterThan(100);
    layers().check(classes);
  }

  @Test
  void exporterPackagesHaveNoCycles() {
    slices().matching(ROOT + ".(*)..").should().beFreeOfCycles().check(classes);
  }

  /**
   * Caches belong to the objects that use them (two exporters in one JVM, or two collectors, never
   * share one): no static field that can be reassigned, and none of a mutable container type.
   */
  @Test
  void noMutableStaticState() {
    fields().that().areStatic().should().beFinal().check(classes);
    noFields()
        .that()
        .areStatic()
        .should()
        .haveRawType(ConcurrentHashMap.class)
        .orShould()
        .haveRawType(HashMap.class)
        .orShould()
        .haveRawType(LinkedHashMap.class)
        .orShould()
        .haveRawType(ArrayList.class)
        .orShould()
        .haveRawType(ThreadLocal.class)
        .orShould()
        .haveRawType(AtomicLong.class)
        .orShould()
        .haveRawType(AtomicInteger.class)
        .orShould()
        .haveRawType(AtomicReference.class)
        .check(classes);
  }
}
