package io.vgpu.exporter.discovery;

import io.vgpu.regioncodec.RegionIoException;
import io.vgpu.regioncodec.SafeOpen;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Set;

/**
 * {@link SideFileReader} on region-codec's {@link SafeOpen}: the name is resolved below the
 * container directory without following any link, opened {@code O_PATH} (a FIFO or device is never
 * opened for I/O), and the descriptor must show a regular file of at most the bound with exactly
 * one name before that same file is read.
 */
public final class SafeOpenSideFileReader implements SideFileReader {
  @Override
  public Result read(Path dir, String name, int maxBytes) {
    Path relative = Path.of(name);
    if (relative.getNameCount() != 1 || relative.isAbsolute() || name.equals("..")) {
      return new Result.Refused("not a plain name");
    }
    try {
      // Most directories have no side file: answer that without opening anything.
      Files.readAttributes(dir.resolve(relative), "unix:mode", LinkOption.NOFOLLOW_LINKS);
    } catch (NoSuchFileException e) {
      return new Result.Missing();
    } catch (IOException | RuntimeException e) {
      return new Result.Refused("cannot stat");
    }
    try (SafeOpen.Opened opened =
        SafeOpen.open(dir, relative, false, new SafeOpen.Expect(maxBytes, true, Set.of()))) {
      ByteBuffer buffer = ByteBuffer.allocate(maxBytes + 1);
      while (buffer.hasRemaining() && opened.channel().read(buffer) > 0) {
        // until the bound or end of file (the file may grow after the size check)
      }
      if (buffer.position() > maxBytes) {
        return new Result.Refused("too large");
      }
      byte[] out = new byte[buffer.position()];
      buffer.flip().get(out);
      return new Result.Content(out);
    } catch (RegionIoException e) {
      return new Result.Refused(e.reason().label());
    } catch (IOException | RuntimeException e) {
      return new Result.Refused("cannot read");
    }
  }
}
