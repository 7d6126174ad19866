/* Durable, atomic whole-file writes (io/atomic_file.h). */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes all n bytes to fd (write() may write part of them); false with errno set. */
static bool write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* fsync of the folder holding path, so that the rename itself survives a power loss.
 * Filesystems that cannot sync a folder (EINVAL) have nothing more to offer. */
static tg_status sync_folder(const char *op, const char *path) {
    const char *slash = strrchr(path, '/');
    size_t len = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(len + 2);
    if (!dir) return tg_error("%s: out of memory", op);
    if (len) memcpy(dir, path, len);
    else dir[len++] = '.';
    dir[len] = '\0';
    tg_status status = TG_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP))
        status = tg_error("%s: %s was written, but syncing its folder %s failed: %s", op, path, dir, strerror(errno));
    if (fd >= 0) close(fd);
    free(dir);
    return status;
}

/* Durable and atomic: the bytes go to path.tmp, which is fsync'ed, renamed over path,
 * and the folder fsync'ed; a crash leaves the old file or the new one, never a mix. A
 * path.tmp left by a killed save is unlinked first (also when it is a symlink or
 * read-only: O_EXCL then creates a fresh file, never writing through a link). */
tg_status tg_write_file_atomic(const char *op, const char *path, const void *data, size_t n) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) return tg_error("%s: out of memory", op);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    tg_status status = TG_OK;
    if (unlink(tmp) != 0 && errno != ENOENT) {
        status = tg_error("%s: cannot remove the stale %s: %s", op, tmp, strerror(errno));
    } else {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) {
            status = tg_error("%s: cannot create %s: %s", op, tmp, strerror(errno));
        } else {
            const char *failed = !write_all(fd, data, n) ? "writing" : fsync(fd) != 0 ? "syncing" : NULL;
            int e = errno;
            if (close(fd) != 0 && !failed) failed = "closing", e = errno;
            if (failed) {
                status = tg_error("%s: %s %s failed: %s", op, failed, tmp, strerror(e));
                unlink(tmp);
            } else if (rename(tmp, path) != 0) {
                status = tg_error("%s: cannot rename %s to %s: %s", op, tmp, path, strerror(errno));
                unlink(tmp);
            } else {
                status = sync_folder(op, path);
            }
        }
    }
    free(tmp);
    return status;
}
