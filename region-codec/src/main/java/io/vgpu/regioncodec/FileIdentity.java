package io.vgpu.regioncodec;

/**
 * What identifies one incarnation of a region file on disk: a recreated file has a new inode, a
 * truncated or extended one a new size.
 *
 * @param device the {@code st_dev} of the file system
 * @param inode the {@code st_ino}
 * @param size the size in bytes when it was observed
 * @param mtimeNanos the modification time in nanoseconds since the epoch
 */
public record FileIdentity(long device, long inode, long size, long mtimeNanos) {
  /** Validates the size. */
  public FileIdentity {
    if (size < 0) {
      throw new IllegalArgumentException("size must not be negative: " + size);
    }
  }

  /** Whether {@code other} is the same file (device and inode) with the same size. */
  public boolean sameFileAndSize(FileIdentity other) {
    return device == other.device && inode == other.inode && size == other.size;
  }
}
