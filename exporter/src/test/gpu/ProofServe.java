import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The exporter as {@code serve} wires it (ExporterApp, real NVML, real /proc), with the pod
 * metadata an API server would give it read from a file: the GPU machine has no API server, and
 * a container without a region is attributed through its pod's metadata (pod UID, container id).
 * For the sharing proof (sharing_proof.sh); compiled against the exporter's jars where the proof
 * is prepared (sharing_bundle.sh, or the dry run), since the GPU machine's Java has no compiler.
 *
 * <pre>
 *   java -cp exporter.jar:lib/*:DIR ProofServe PODS-FILE --flag=value...
 * </pre>
 *
 * PODS-FILE: one line per container, {@code <pod uid> <namespace> <pod> <container> <container
 * id>}. The flags are the exporter's own (without their leading dashes in the config).
 */
public final class ProofServe {
  private ProofServe() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: ProofServe PODS-FILE [--flag=value...]");
      System.exit(2);
    }
    Map<String, PodMeta> pods = new HashMap<>();
    for (String line : Files.readAllLines(Path.of(args[0]))) {
      String[] f = line.trim().split("\\s+");
      if (f.length != 5) {
        continue;
      }
      ContainerMeta c =
          new ContainerMeta(
              f[3], ContainerMeta.Kind.REGULAR, Optional.of(f[4]), ContainerMeta.State.RUNNING);
      PodMeta old = pods.get(f[0]);
      Map<String, ContainerMeta> cs = new HashMap<>(old == null ? Map.of() : old.containers());
      cs.put(f[3], c);
      pods.put(
          f[0],
          new PodMeta(f[0], f[1], f[2], "Running", Optional.of("besteffort"), Map.of(), cs));
    }
    Map<String, String> flags = new HashMap<>();
    for (int i = 1; i < args.length; i++) {
      String a = args[i];
      int eq = a.indexOf('=');
      if (!a.startsWith("--") || eq < 0) {
        System.err.println("flags are --name=value: " + a);
        System.exit(2);
      }
      flags.put(a.substring(2, eq), a.substring(eq + 1));
    }
    ExporterApp app =
        ExporterApp.builder(ExporterConfig.resolve(flags, Map.of()))
            .metadata(StaticMetadataSource.of(new ArrayList<>(pods.values()), NodeMeta.unknown()))
            .build()
            .start();
    List<String> names = new ArrayList<>();
    pods.values().forEach(p -> names.add(p.namespace() + "/" + p.name()));
    System.out.println("proof exporter on port " + app.port() + " with pods " + names);
    Runtime.getRuntime().addShutdownHook(new Thread(app::close));
    Thread.currentThread().join();
  }
}
