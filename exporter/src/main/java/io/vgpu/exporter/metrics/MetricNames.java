package io.vgpu.exporter.metrics;

/**
 * Every metric family name the exporter can emit, as constants (names without the {@code _total}
 * suffix client_java adds to counters are marked). README's "Metrics" section lists the same set; a
 * test checks they agree.
 */
public final class MetricNames {
  private MetricNames() {}

  // Per container x device: {node, namespace, pod, container, pod_uid, device_index, device_uuid}
  public static final String CONTAINER_MEMORY_USED = "vgpu_container_memory_used_bytes";
  public static final String CONTAINER_MEMORY_LIMIT = "vgpu_container_memory_limit_bytes";

  /** Extra label {@code kind} = context | module | data. */
  public static final String CONTAINER_MEMORY_BREAKDOWN = "vgpu_container_memory_breakdown_bytes";

  public static final String CONTAINER_SM_LIMIT = "vgpu_container_sm_limit_ratio";
  public static final String CONTAINER_REGION_SM_UTILIZATION =
      "vgpu_container_region_sm_utilization_ratio";

  /** What the region's {@code monitorused} claims (NVML as the in-container library saw it). */
  public static final String CONTAINER_REGION_NVML_MEMORY_USED =
      "vgpu_container_region_nvml_memory_used_bytes";

  /** Counter (exposed with {@code _total}). */
  public static final String CONTAINER_OOM_REJECTIONS = "vgpu_container_oom_rejections";

  /** Counter (exposed with {@code _total}). */
  public static final String LIMITER_THROTTLED_SECONDS = "vgpu_limiter_throttled_seconds";

  /** Counter (exposed with {@code _total}). */
  public static final String LIMITER_LAUNCHES_DELAYED = "vgpu_limiter_launches_delayed";

  // Attribution helper (issue 5), per container x device.
  public static final String CONTAINER_SM_UTILIZATION = "vgpu_container_sm_utilization_ratio";
  public static final String CONTAINER_NVML_MEMORY_USED = "vgpu_container_nvml_memory_used_bytes";
  public static final String CONTAINER_ZOMBIE_MEMORY = "vgpu_container_zombie_memory_bytes";

  /** =1 while the reconciled utilization is unknown; extra label {@code reason}. */
  public static final String CONTAINER_SM_UTILIZATION_UNKNOWN =
      "vgpu_container_sm_utilization_unknown";

  /** Counter (exposed with {@code _total}): time above the SM limit by reconciled utilization. */
  public static final String CONTAINER_OVER_SM_LIMIT_SECONDS =
      "vgpu_container_over_sm_limit_seconds";

  // Per container: {node, namespace, pod, container, pod_uid}
  /** Extra label {@code state} = running | suspended. */
  public static final String CONTAINER_PROCESSES = "vgpu_container_processes";

  public static final String CONTAINER_LAST_KERNEL_TIMESTAMP =
      "vgpu_container_last_kernel_timestamp_seconds";

  /** Info (exposed with {@code _info}, =1), extra labels {@code layout, version}. */
  public static final String CONTAINER_REGION_INFO = "vgpu_container_region";

  /** Info (exposed with {@code _info}), extra labels qos_class, container_kind, label_*. */
  public static final String CONTAINER_INFO = "vgpu_container_pod";

  /** How a container holds a device (info: vgpu_container_device_info). */
  public static final String CONTAINER_DEVICE_INFO = "vgpu_container_device";

  // Per MIG device (collector mig): {node, device_uuid (the parent GPU's), mig_uuid}
  /** Info (exposed with {@code _info}), extra labels device_index, GI/CI ids, mig_profile. */
  public static final String MIG_DEVICE_INFO = "vgpu_mig_device";

  public static final String MIG_MEMORY_USED = "vgpu_mig_memory_used_bytes";
  public static final String MIG_MEMORY_TOTAL = "vgpu_mig_memory_total_bytes";
  public static final String MIG_PROCESSES = "vgpu_mig_processes";

  /** The GPU instance's SM activity from NVML GPM (Hopper and newer). */
  public static final String MIG_SM_ACTIVITY = "vgpu_mig_sm_activity_ratio";

  /** =1 while the MIG SM activity is unknown; extra label {@code reason}. */
  public static final String MIG_SM_ACTIVITY_UNKNOWN = "vgpu_mig_sm_activity_unknown";

  /** HAMi's MIG family (exposed as {@code hami_mig_device_info}), per container x MIG device. */
  public static final String HAMI_MIG_DEVICE_INFO = "hami_mig_device";

  /** GPU processes no container holds, by reason (not_in_a_pod, pod_unknown, …). */
  public static final String GPU_UNATTRIBUTED_PROCESSES_BY_REASON =
      "vgpu_gpu_unattributed_processes_by_reason";

  public static final String CONTAINER_STALE = "vgpu_container_stale";

  /** 1 when the pod Succeeded/Failed (or an init container completed): nothing runs. */
  public static final String CONTAINER_FINISHED = "vgpu_container_finished";

  public static final String CONTAINER_CACHE_FILES = "vgpu_container_cache_files";

  /**
   * 1 per cause while libvgpu runs a process of the container on process-local limits (its {@code
   * .degraded} side file), extra label {@code cause}; absent when none.
   */
  public static final String CONTAINER_REGION_DEGRADED = "vgpu_container_region_degraded";

  public static final String CONTAINER_REGION_UNREADABLE = "vgpu_container_region_unreadable";

  public static final String CONTAINER_PRIORITY = "vgpu_container_priority";

  // Attribution helper (issue 5), per container.
  public static final String CONTAINER_UTILIZATION_SWITCH = "vgpu_container_utilization_switch";
  public static final String CONTAINER_PRIORITY_BLOCKED = "vgpu_container_priority_blocked";

  public static final String CONTAINER_ZOMBIE_SLOTS = "vgpu_container_zombie_slots";
  public static final String CONTAINER_HOSTPID_MISMATCH_SLOTS =
      "vgpu_container_hostpid_mismatch_slots";

  /**
   * Gauge, container labels plus reason: GPU processes of a limited pod without a slot (the
   * evidence pass's judgment).
   */
  public static final String CONTAINER_UNSLOTTED_PROCESSES = "vgpu_container_unslotted_processes";

  public static final String CONTAINER_MEMORY_IDLE_SECONDS = "vgpu_container_memory_idle_seconds";

  /** 1 when memory has been held without a kernel for the configured leak threshold. */
  public static final String CONTAINER_MEMORY_LEAK_SUSPECTED =
      "vgpu_container_memory_leak_suspected";

  /** Counter (exposed with {@code _total}). */
  public static final String CONTAINER_PRIORITY_BLOCKED_SECONDS =
      "vgpu_container_priority_blocked_seconds";

  // Per GPU (NVML helper): {node, device_index, device_uuid, model}
  public static final String GPU_MEMORY_USED = "vgpu_gpu_memory_used_bytes";
  public static final String GPU_MEMORY_TOTAL = "vgpu_gpu_memory_total_bytes";
  public static final String GPU_UTILIZATION = "vgpu_gpu_utilization_ratio";
  public static final String GPU_CONTAINERS = "vgpu_gpu_containers";
  public static final String GPU_PROCESSES = "vgpu_gpu_processes";
  public static final String GPU_UNATTRIBUTED_PROCESSES = "vgpu_gpu_unattributed_processes";
  public static final String GPU_UNATTRIBUTED_MEMORY = "vgpu_gpu_unattributed_memory_bytes";

  // Per physical GPU health (DeviceHealthCollector): G, plus the label named after the name
  public static final String GPU_POWER = "vgpu_gpu_power_watts";
  public static final String GPU_TEMPERATURE = "vgpu_gpu_temperature_celsius";
  public static final String GPU_CLOCK_EVENT_REASONS = "vgpu_gpu_clock_event_reasons";
  public static final String GPU_XID_ERRORS = "vgpu_gpu_xid_errors";
  public static final String GPU_ECC_VOLATILE_ERRORS = "vgpu_gpu_ecc_volatile_errors";
  public static final String GPU_ECC_AGGREGATE_ERRORS = "vgpu_gpu_ecc_aggregate_errors";
  public static final String GPU_REMAPPED_ROWS = "vgpu_gpu_remapped_rows";
  public static final String GPU_ROW_REMAP_PENDING = "vgpu_gpu_row_remap_pending";
  public static final String GPU_ROW_REMAP_FAILURE = "vgpu_gpu_row_remap_failure";
  public static final String GPU_HEALTH_UNAVAILABLE = "vgpu_gpu_health_unavailable";
  public static final String EXPORTER_XID_EVENTS_UNMATCHED = "vgpu_exporter_xid_events_unmatched";

  // Node: {node}
  public static final String NODE_HANDSHAKE_AGE = "vgpu_node_handshake_age_seconds";
  public static final String NODE_REGISTERED_DEVICES = "vgpu_node_registered_devices";
  public static final String NODE_MUTEX_LOCKED = "vgpu_node_mutex_locked";

  // The one judgment (JudgmentCollector): doctor's verdict and findings, as the status page shows
  public static final String CONTAINER_VERDICT = "vgpu_container_verdict";
  public static final String CONTAINER_FINDINGS = "vgpu_container_findings";
  public static final String NODE_FINDINGS = "vgpu_node_findings";

  // Self
  /** Info (exposed with {@code _info}), labels version, revision. */
  public static final String EXPORTER_BUILD_INFO = "vgpu_exporter_build";

  public static final String EXPORTER_SCRAPE_DURATION = "vgpu_exporter_scrape_duration_seconds";
  public static final String EXPORTER_FILES_MAPPED = "vgpu_exporter_files_mapped";

  /** Counter (exposed with {@code _total}), label reason. */
  public static final String EXPORTER_PARSE_ERRORS = "vgpu_exporter_parse_errors";

  /** Counter (exposed with {@code _total}): snapshots served with a slot seqlock unsettled. */
  public static final String EXPORTER_BEST_EFFORT_READS = "vgpu_exporter_region_best_effort_reads";

  public static final String EXPORTER_APISERVER_UP = "vgpu_exporter_apiserver_up";
  public static final String EXPORTER_CACHE_ROOT_READABLE = "vgpu_exporter_cache_root_readable";
  public static final String EXPORTER_DISCOVERY_AGE = "vgpu_exporter_discovery_age_seconds";
  public static final String EXPORTER_COLLECTOR_SUCCESS = "vgpu_exporter_collector_success";
  public static final String EXPORTER_COLLECTOR_DURATION =
      "vgpu_exporter_collector_duration_seconds";

  /** Gauge, device labels plus reason: a region uuid not used as the device label. */
  public static final String CONTAINER_DEVICE_UUID_REJECTED = "vgpu_container_device_uuid_rejected";

  // Evidence pass (issue 31)
  public static final String EVIDENCE_PASS_AGE = "vgpu_exporter_evidence_pass_age_seconds";
  public static final String EVIDENCE_PASS_STALLED = "vgpu_exporter_evidence_pass_stalled";

  /** Gauge, label reason: pod processes the latest pass did not see whole. */
  public static final String EVIDENCE_UNSEEN_PROCESSES = "vgpu_exporter_evidence_unseen_processes";

  public static final String EVIDENCE_PODS_NOT_FULLY_SEEN =
      "vgpu_exporter_evidence_pods_not_fully_seen";

  /** Counter (exposed with {@code _total}). */
  public static final String TENANT_READS_GIVEN_UP = "vgpu_exporter_tenant_reads_given_up";

  // Network defences (issue 31). Counters (exposed with {@code _total}).
  /** Label reason: per_client_limit, handshake_timeout. */
  public static final String HTTP_CONNECTIONS_REJECTED = "vgpu_exporter_http_connections_rejected";

  public static final String HTTP_AUTH_THROTTLED = "vgpu_exporter_http_auth_throttled";

  // NVML helper (issue 5)
  public static final String EXPORTER_NVML_UP = "vgpu_exporter_nvml_up";

  /** Counter (exposed with {@code _total}), label return_code. */
  public static final String EXPORTER_NVML_ERRORS = "vgpu_exporter_nvml_errors";

  /** Counter (exposed with {@code _total}), label field. */
  public static final String EXPORTER_REGION_WRITES = "vgpu_exporter_region_writes";

  /** Counter (exposed with {@code _total}), label reason: region writes that failed. */
  public static final String EXPORTER_REGION_WRITE_ERRORS = "vgpu_exporter_region_write_errors";

  // HAMi vGPU monitor drop-in names; every series carries zone="vGPU".
  public static final String HAMI_VGPU_MEMORY_USED = "hami_vgpu_memory_used_bytes";
  public static final String HAMI_VGPU_MEMORY_LIMIT = "hami_vgpu_memory_limit_bytes";
  public static final String HAMI_CONTAINER_DEVICE_UTILIZATION =
      "hami_container_device_utilization_ratio";
  public static final String HAMI_CONTAINER_DEVICE_MEMORY = "hami_container_device_memory_bytes";
  public static final String HAMI_CONTAINER_LAST_KERNEL_ELAPSED =
      "hami_container_last_kernel_elapsed_seconds";
  public static final String HAMI_VGPU_MEMORY_CONTEXT = "hami_vgpu_memory_context_bytes";
  public static final String HAMI_VGPU_MEMORY_MODULE = "hami_vgpu_memory_module_bytes";
  public static final String HAMI_VGPU_MEMORY_BUFFER = "hami_vgpu_memory_buffer_bytes";
  // Per physical GPU (NVML helper fills these).
  public static final String HAMI_HOST_GPU_MEMORY_USED = "hami_host_gpu_memory_used_bytes";
  public static final String HAMI_HOST_GPU_UTILIZATION = "hami_host_gpu_utilization_ratio";
  public static final String HAMI_HOST_GPU_MEMORY_CONTROLLER_UTILIZATION =
      "hami_host_gpu_memory_controller_utilization_ratio";

  /** HAMi's zone label and value, on every hami_* series. */
  public static final String HAMI_ZONE_LABEL = "zone";

  public static final String HAMI_ZONE = "vGPU";

  // Usage accounting (UsageCollector)
  public static final String CONTAINER_SM_BUSY_SECONDS = "vgpu_container_sm_busy_seconds";
  public static final String CONTAINER_MEMORY_USED_BYTE_SECONDS =
      "vgpu_container_memory_used_byte_seconds";
  public static final String CONTAINER_MEMORY_LIMIT_BYTE_SECONDS =
      "vgpu_container_memory_limit_byte_seconds";
  public static final String CONTAINER_ENERGY = "vgpu_container_energy_joules";
  public static final String GPU_ENERGY = "vgpu_gpu_energy_joules";
  public static final String GPU_UNATTRIBUTED_ENERGY = "vgpu_gpu_unattributed_energy_joules";
  public static final String GPU_EXPIRED_ENERGY = "vgpu_gpu_expired_container_energy_joules";
  public static final String GPU_UNATTRIBUTED_SM_BUSY = "vgpu_gpu_unattributed_sm_busy_seconds";
  public static final String GPU_USAGE_UNKNOWN = "vgpu_gpu_usage_unknown";
  public static final String EXPORTER_USAGE_ACCOUNTED_TIMESTAMP =
      "vgpu_exporter_usage_accounted_timestamp_seconds";
  public static final String LIMITER_BUSY_SECONDS = "vgpu_limiter_busy_seconds";

  // Label names
  public static final String L_NODE = "node";
  public static final String L_NAMESPACE = "namespace";
  public static final String L_POD = "pod";
  public static final String L_CONTAINER = "container";
  public static final String L_POD_UID = "pod_uid";
  public static final String L_DEVICE_INDEX = "device_index";
  public static final String L_DEVICE_UUID = "device_uuid";
  public static final String L_MODEL = "model";
  public static final String L_HAMI_VDEVICE_INDEX = "vdevice_index";
  public static final String L_HAMI_DEVICE_TYPE = "device_type";
}
