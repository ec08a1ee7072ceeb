package io.vgpu.exporter.kubelet;

import io.grpc.CallOptions;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;
import io.grpc.stub.ClientCalls;
import io.vgpu.kubelet.podresources.v1.AllocatableResourcesRequest;
import io.vgpu.kubelet.podresources.v1.AllocatableResourcesResponse;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesRequest;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * A gRPC channel to the kubelet's pod-resources socket. Every call has a deadline and fails fast
 * when the socket is missing (no wait-for-ready); replies over the message limit are refused by
 * gRPC before they are parsed. One event-loop thread, a daemon.
 */
final class PodResourcesClient implements AutoCloseable {
  /** Reply headers (the kubelet sends a few short ones). */
  static final int MAX_METADATA_BYTES = 16 << 10;

  private final EventLoopGroup loop;
  private final ManagedChannel channel;

  /**
   * @throws IllegalStateException when the epoll transport (unix sockets) cannot load here
   */
  PodResourcesClient(Path socket, int maxMessageBytes) {
    if (!Epoll.isAvailable()) {
      throw new IllegalStateException(
          "epoll transport unavailable (unix sockets need it): " + Epoll.unavailabilityCause());
    }
    this.loop =
        new MultiThreadIoEventLoopGroup(
            1, new DefaultThreadFactory("pod-resources-io", true), EpollIoHandler.newFactory());
    this.channel =
        NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toString()))
            .eventLoopGroup(loop)
            .channelType(EpollDomainSocketChannel.class)
            .usePlaintext()
            // The kubelet's Go server ignores :authority; a fixed one keeps the path out of it.
            .overrideAuthority("localhost")
            .maxInboundMessageSize(maxMessageBytes)
            .maxInboundMetadataSize(MAX_METADATA_BYTES)
            .disableRetry()
            .directExecutor()
            .userAgent("vgpu-exporter")
            .build();
  }

  ListPodResourcesResponse list(Duration timeout) {
    return call(PodResourcesMethods.LIST, ListPodResourcesRequest.getDefaultInstance(), timeout);
  }

  AllocatableResourcesResponse allocatable(Duration timeout) {
    return call(
        PodResourcesMethods.GET_ALLOCATABLE_RESOURCES,
        AllocatableResourcesRequest.getDefaultInstance(),
        timeout);
  }

  private <Q, R> R call(MethodDescriptor<Q, R> method, Q request, Duration timeout) {
    // After a failed connect gRPC waits out its own back-off (up to 2 min) before dialling again;
    // the poller has its own, so a socket that came back is tried at the next poll.
    if (channel.getState(false) == ConnectivityState.TRANSIENT_FAILURE) {
      channel.resetConnectBackoff();
    }
    return ClientCalls.blockingUnaryCall(
        channel,
        method,
        CallOptions.DEFAULT.withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS),
        request);
  }

  /** A one-line description of a failed call, for logs and /readyz (never reply contents). */
  static String describe(RuntimeException e) {
    if (e instanceof StatusRuntimeException s) {
      var status = s.getStatus();
      String d = status.getDescription();
      // The description may carry the server's grpc-message: printable ASCII only, bounded.
      String text = status.getCode() + (d == null ? "" : ": " + printable(d));
      return text.length() > 200 ? text.substring(0, 200) + "..." : text;
    }
    return e.getClass().getSimpleName();
  }

  private static String printable(String s) {
    var b = new StringBuilder(Math.min(s.length(), 200));
    for (int i = 0; i < s.length() && b.length() < 200; i++) {
      char c = s.charAt(i);
      b.append(c >= 0x20 && c < 0x7f ? c : '?');
    }
    return b.toString();
  }

  @Override
  public void close() {
    channel.shutdownNow();
    try {
      channel.awaitTermination(2, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    var _ = loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
  }
}
