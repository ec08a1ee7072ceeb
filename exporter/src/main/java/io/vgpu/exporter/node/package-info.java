/**
 * The joined node view every surface reads ({@code NodeState}, {@code ContainerState}, the slot
 * policy), built once per scrape, and the evidence pass over the regions and the pod processes'
 * procfs entries that the status page and the doctor judge.
 */
package io.vgpu.exporter.node;
