package io.vgpu.exporter.testing;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;

/** Kubernetes objects and clients the API-server tests (mock server) share. */
public final class KubeObjects {
  private KubeObjects() {}

  /** A Running pod in namespace {@code ml} on {@code node} with one container. */
  public static Pod runningPod(
      String node, String uid, String name, String container, String resourceVersion) {
    return new PodBuilder()
        .withNewMetadata()
        .withName(name)
        .withNamespace("ml")
        .withUid(uid)
        .withResourceVersion(resourceVersion)
        .endMetadata()
        .withNewSpec()
        .withNodeName(node)
        .addNewContainer()
        .withName(container)
        .endContainer()
        .endSpec()
        .withNewStatus()
        .withPhase("Running")
        .endStatus()
        .build();
  }

  /** A client of a mock API server on 127.0.0.1:{@code port}, with short timeouts. */
  public static KubernetesClient localClient(int port) {
    Config c =
        new ConfigBuilder()
            .withMasterUrl("http://127.0.0.1:" + port)
            .withNamespace("default")
            .withRequestTimeout(2000)
            .withConnectionTimeout(1000)
            .build();
    return new KubernetesClientBuilder().withConfig(c).build();
  }
}
