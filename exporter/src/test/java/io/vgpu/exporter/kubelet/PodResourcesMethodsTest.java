package io.vgpu.exporter.kubelet;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.MethodDescriptor;
import io.vgpu.kubelet.podresources.v1.PodResourcesApi;
import org.junit.jupiter.api.Test;

/** The hand-written method descriptors say what the compiled .proto says. */
class PodResourcesMethodsTest {
  @Test
  void descriptorsMatchTheCompiledService() {
    var service = PodResourcesApi.getDescriptor().findServiceByName("PodResourcesLister");
    assertThat(service.getFullName()).isEqualTo(PodResourcesMethods.SERVICE);
    check(PodResourcesMethods.LIST, service.findMethodByName("List"));
    check(
        PodResourcesMethods.GET_ALLOCATABLE_RESOURCES,
        service.findMethodByName("GetAllocatableResources"));
  }

  @Test
  void fieldNumbersAreThePublishedOnes() {
    var file = PodResourcesApi.getDescriptor();
    var container = file.findMessageTypeByName("ContainerResources");
    assertThat(container.findFieldByName("dynamic_resources").getNumber()).isEqualTo(5);
    assertThat(container.findFieldByName("devices").getNumber()).isEqualTo(2);
    var claim = file.findMessageTypeByName("DynamicResource");
    assertThat(claim.findFieldByNumber(1)).as("class_name is a tombstone").isNull();
    assertThat(claim.findFieldByName("claim_resources").getNumber()).isEqualTo(4);
    assertThat(file.getPackage()).isEqualTo("v1");
  }

  private static void check(
      MethodDescriptor<?, ?> method, com.google.protobuf.Descriptors.MethodDescriptor proto) {
    assertThat(method.getFullMethodName())
        .isEqualTo(proto.getService().getFullName() + "/" + proto.getName());
    assertThat(method.getType()).isEqualTo(MethodDescriptor.MethodType.UNARY);
    assertThat(proto.isClientStreaming() || proto.isServerStreaming()).isFalse();
    var req = (io.grpc.MethodDescriptor.PrototypeMarshaller<?>) method.getRequestMarshaller();
    var res = (io.grpc.MethodDescriptor.PrototypeMarshaller<?>) method.getResponseMarshaller();
    assertThat(((com.google.protobuf.Message) req.getMessagePrototype()).getDescriptorForType())
        .isEqualTo(proto.getInputType());
    assertThat(((com.google.protobuf.Message) res.getMessagePrototype()).getDescriptorForType())
        .isEqualTo(proto.getOutputType());
  }
}
