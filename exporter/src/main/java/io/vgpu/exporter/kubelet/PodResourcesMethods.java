package io.vgpu.exporter.kubelet;

import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;
import io.vgpu.kubelet.podresources.v1.AllocatableResourcesRequest;
import io.vgpu.kubelet.podresources.v1.AllocatableResourcesResponse;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesRequest;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesResponse;

/**
 * The two methods of the kubelet's {@code v1.PodResourcesLister} the exporter calls. The message
 * classes are compiled from src/main/protobuf by protoc; these descriptors stand in for
 * protoc-gen-grpc-java's stub (its binary is not available to this build), and
 * PodResourcesMethodsTest checks them against the compiled service descriptor.
 */
public final class PodResourcesMethods {
  /** The service's wire name (proto package {@code v1}). */
  public static final String SERVICE = "v1.PodResourcesLister";

  public static final MethodDescriptor<ListPodResourcesRequest, ListPodResourcesResponse> LIST =
      MethodDescriptor.<ListPodResourcesRequest, ListPodResourcesResponse>newBuilder()
          .setType(MethodDescriptor.MethodType.UNARY)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "List"))
          .setRequestMarshaller(ProtoUtils.marshaller(ListPodResourcesRequest.getDefaultInstance()))
          .setResponseMarshaller(
              ProtoUtils.marshaller(ListPodResourcesResponse.getDefaultInstance()))
          .setIdempotent(true)
          .build();

  public static final MethodDescriptor<AllocatableResourcesRequest, AllocatableResourcesResponse>
      GET_ALLOCATABLE_RESOURCES =
          MethodDescriptor.<AllocatableResourcesRequest, AllocatableResourcesResponse>newBuilder()
              .setType(MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(
                  MethodDescriptor.generateFullMethodName(SERVICE, "GetAllocatableResources"))
              .setRequestMarshaller(
                  ProtoUtils.marshaller(AllocatableResourcesRequest.getDefaultInstance()))
              .setResponseMarshaller(
                  ProtoUtils.marshaller(AllocatableResourcesResponse.getDefaultInstance()))
              .setIdempotent(true)
              .build();

  private PodResourcesMethods() {}
}
