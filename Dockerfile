# vgpu-exporter image: the exporter on a jlink'ed Java 25 runtime, plus libvgpu.so, shrreg-tool and
# vgpu-install for the chart's installer mode. `vgpu-exporter` (a static launcher: the image has no
# shell) and `shrreg-tool` are on PATH, so `kubectl exec POD -- vgpu-exporter doctor` and
# `kubectl exec POD -- shrreg-tool --inspect --file F` work, and `cleanup --apply` finds shrreg-tool.
# Everything is prepared outside (deploy/image/build.sh stages it under deploy/image/target/context),
# so the build needs no network:
#   docker build --network none --build-arg BASE_IMAGE=vgpu-base:local -t vgpu-exporter:0.1.0 \
#     -f Dockerfile deploy/image/target/context
# BASE_IMAGE needs only glibc (the default is deploy/image/build-base.sh's FROM-scratch base:
# the host's glibc, ld.so and an /etc/passwd with uid 65534). Any glibc distro image works too.
ARG BASE_IMAGE=vgpu-base:local
FROM ${BASE_IMAGE}

COPY jre/ /opt/vgpu-exporter/jre/
COPY bin/ /opt/vgpu-exporter/bin/
COPY lib/ /opt/vgpu-exporter/lib/
COPY exporter.jar /opt/vgpu-exporter/exporter.jar
COPY vgpu/ /opt/vgpu/

# Same JVM footprint flags as bin/vgpu-exporter; /tmp is where JNA unpacks its stub (an emptyDir
# in the chart, whose root filesystem is read-only). The launcher passes them to java as arguments
# (not JDK_JAVA_OPTIONS, which makes java print "Picked up ..." before every command).
ENV VGPU_EXPORTER_JAVA_OPTS="-XX:+UseSerialGC -Xms16m -Xmx48m -XX:MaxMetaspaceSize=64m -XX:ReservedCodeCacheSize=32m -Xss512k -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:TrimNativeHeapInterval=5000 -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 -XX:-ShrinkHeapInSteps -XX:+ExitOnOutOfMemoryError -Djava.io.tmpdir=/tmp -Djna.tmpdir=/tmp" \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility

# The operator commands: /opt/vgpu-exporter/bin/vgpu-exporter, /opt/vgpu/bin/{shrreg-tool,vgpu-install}.
ENV PATH=/opt/vgpu-exporter/bin:/opt/vgpu/bin:/usr/local/bin:/usr/bin:/bin

# Read-only mode runs as nobody; the chart switches to uid 0 only for write-back modes.
USER 65534:65534
EXPOSE 9394
# The launcher execs /opt/vgpu-exporter/jre/bin/java -jar /opt/vgpu-exporter/exporter.jar "$@".
ENTRYPOINT ["/opt/vgpu-exporter/bin/vgpu-exporter"]
CMD ["serve"]
