package io.vgpu.exporter.discovery;

import io.vgpu.regioncodec.FileIdentity;
import io.vgpu.regioncodec.RegionIoException;
import io.vgpu.regioncodec.internal.Opener;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Map;

/**
 * {@link SideFileReader} on region-codec's cache-file opener, the one discovery maps regions with:
 * {@code open(O_NONBLOCK | O_NOFOLLOW)}, type checked on the descriptor, the channel opened on
 * {@code /proc/self/fd/N}. That opener does not report the link count, so the count is read from
 * the path afterwards and must belong to the same inode the descriptor showed.
 */
public final class NoFollowSideFileReader implements SideFileReader {
  @Override
  public Result read(Path dir, String name, int maxBytes) {
    Path path = dir.resolve(name);
    if (!path.getParent().equals(dir)) {
      return new Result.Refused("not a plain name");
    }
    try {
      Files.readAttributes(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
    } catch (NoSuchFileException e) {
      return new Result.Missing();
    } catch (IOException | RuntimeException e) {
      return new Result.Refused("cannot stat");
    }
    Opener.Opened opened;
    try {
      opened = Opener.open(path, false);
    } catch (RegionIoException e) {
      return new Result.Refused(e.reason().label());
    } catch (RuntimeException e) {
      return new Result.Refused("cannot open");
    }
    try (FileChannel channel = opened.channel()) {
      FileIdentity id = opened.identity();
      if (id.size() > maxBytes) {
        return new Result.Refused("too large");
      }
      Map<String, Object> now =
          Files.readAttributes(path, "unix:dev,ino,nlink", LinkOption.NOFOLLOW_LINKS);
      if (((Number) now.get("dev")).longValue() != id.device()
          || ((Number) now.get("ino")).longValue() != id.inode()) {
        return new Result.Refused("replaced while opened");
      }
      if (((Number) now.get("nlink")).longValue() != 1) {
        return new Result.Refused("hard link");
      }
      ByteBuffer buffer = ByteBuffer.allocate(maxBytes + 1);
      while (buffer.hasRemaining() && channel.read(buffer) > 0) {
        // until the bound or end of file
      }
      if (buffer.position() > maxBytes) {
        return new Result.Refused("too large");
      }
      byte[] out = new byte[buffer.position()];
      buffer.flip().get(out);
      return new Result.Content(out);
    } catch (NoSuchFileException e) {
      return new Result.Missing();
    } catch (IOException | RuntimeException e) {
      return new Result.Refused("cannot read");
    }
  }
}
