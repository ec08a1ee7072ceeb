package io.vgpu.exporter.nvml;

/**
 * One {@code nvmlEventData_t} from {@code nvmlEventSetWait_v2}.
 *
 * @param deviceAddress the {@code nvmlDevice_t} the event is for (compare with {@link
 *     DeviceHandle#address()})
 * @param eventType the event's type bit ({@link #XID_CRITICAL_ERROR} for an XID)
 * @param eventData the XID number for an XID event
 */
public record NvmlEvent(long deviceAddress, long eventType, long eventData) {
  /** {@code nvmlEventTypeXidCriticalError}. */
  public static final long XID_CRITICAL_ERROR = 0x8L;
}
