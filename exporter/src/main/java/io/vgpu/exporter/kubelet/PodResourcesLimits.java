package io.vgpu.exporter.kubelet;

/**
 * What the exporter accepts from the kubelet: an answer over a limit is read up to it and marked
 * truncated, never grown without bound.
 *
 * @param maxMessageBytes largest reply gRPC accepts, refused before it is parsed
 * @param maxPods pods read from one List answer
 * @param maxAssignments GPU device assignments kept from one answer
 */
public record PodResourcesLimits(int maxMessageBytes, int maxPods, int maxAssignments) {
  /**
   * 4 MiB, 20 000 pods, 100 000 assignments: far above a node's 110-pod default (10 000 pods with a
   * GPU each are about 1.2 MB on the wire), and small enough for the exporter's 48 MiB heap to hold
   * the parsed reply beside everything else.
   */
  public static final PodResourcesLimits DEFAULT = new PodResourcesLimits(4 << 20, 20_000, 100_000);

  public PodResourcesLimits {
    if (maxMessageBytes < 1 || maxPods < 1 || maxAssignments < 1) {
      throw new IllegalArgumentException("limits must be positive");
    }
  }
}
