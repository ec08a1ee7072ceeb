package io.vgpu.exporter.demo;

import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.stub.ServerCalls;
import io.vgpu.exporter.kubelet.PodResourcesMethods;
import io.vgpu.kubelet.podresources.v1.AllocatableResourcesResponse;
import io.vgpu.kubelet.podresources.v1.ContainerDevices;
import io.vgpu.kubelet.podresources.v1.ContainerResources;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesResponse;
import io.vgpu.kubelet.podresources.v1.PodResources;
import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A real gRPC server on a unix socket serving the kubelet's {@code v1.PodResourcesLister} List and
 * GetAllocatableResources from settable answers, as the kubelet does (one answer per call, from
 * memory): the demo node's kubelet (which container holds which device), and the kubelet of the
 * pod-resources client's tests. {@link #hang()} makes calls never answer, as a wedged kubelet
 * would.
 */
public final class FakeKubelet implements AutoCloseable {
  private final AtomicReference<ListPodResourcesResponse> list =
      new AtomicReference<>(ListPodResourcesResponse.getDefaultInstance());
  private final AtomicReference<AllocatableResourcesResponse> allocatable =
      new AtomicReference<>(AllocatableResourcesResponse.getDefaultInstance());
  private final AtomicInteger listCalls = new AtomicInteger();
  private volatile boolean hang;
  private final EventLoopGroup boss =
      new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
  private final EventLoopGroup worker =
      new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
  private final Server server;

  /** Serves on a new unix socket at {@code socket} (its directory must exist). */
  public FakeKubelet(Path socket) throws IOException {
    var service =
        ServerServiceDefinition.builder(PodResourcesMethods.SERVICE)
            .addMethod(
                PodResourcesMethods.LIST,
                ServerCalls.asyncUnaryCall(
                    (req, obs) -> {
                      listCalls.incrementAndGet();
                      if (hang) {
                        return; // never answers
                      }
                      obs.onNext(list.get());
                      obs.onCompleted();
                    }))
            .addMethod(
                PodResourcesMethods.GET_ALLOCATABLE_RESOURCES,
                ServerCalls.asyncUnaryCall(
                    (req, obs) -> {
                      if (hang) {
                        return;
                      }
                      obs.onNext(allocatable.get());
                      obs.onCompleted();
                    }))
            .build();
    this.server =
        NettyServerBuilder.forAddress(new DomainSocketAddress(socket.toString()))
            .channelType(EpollServerDomainSocketChannel.class)
            .bossEventLoopGroup(boss)
            .workerEventLoopGroup(worker)
            .maxInboundMessageSize(64 << 20)
            .addService(service)
            .build()
            .start();
  }

  /** From now on calls are accepted and never answered. */
  public FakeKubelet hang() {
    hang = true;
    return this;
  }

  /** The answer to every List call from now on. */
  public FakeKubelet setList(ListPodResourcesResponse answer) {
    list.set(answer);
    return this;
  }

  /** The answer to every GetAllocatableResources call from now on. */
  public FakeKubelet setAllocatable(AllocatableResourcesResponse answer) {
    allocatable.set(answer);
    return this;
  }

  /** List calls received so far (answered or not). */
  public int listCalls() {
    return listCalls.get();
  }

  /** A pod whose one container holds {@code ids} of {@code resource}. */
  public static PodResources pod(
      String ns, String name, String container, String resource, String... ids) {
    return PodResources.newBuilder()
        .setNamespace(ns)
        .setName(name)
        .addContainers(
            ContainerResources.newBuilder()
                .setName(container)
                .addDevices(
                    ContainerDevices.newBuilder()
                        .setResourceName(resource)
                        .addAllDeviceIds(java.util.List.of(ids))))
        .build();
  }

  @Override
  public void close() {
    server.shutdownNow();
    try {
      server.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while closing", e);
    } finally {
      var _ = boss.shutdownGracefully(0, 1, TimeUnit.SECONDS);
      var _ = worker.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }
  }
}
