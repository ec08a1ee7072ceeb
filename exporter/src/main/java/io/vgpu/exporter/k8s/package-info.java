/**
 * Pod metadata from the API server: a node-scoped informer, its health, and the static source used
 * when Kubernetes is off.
 */
package io.vgpu.exporter.k8s;
