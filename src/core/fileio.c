/* Files as wholes: reading a regular file into memory, and the one atomic
 * writer every file of the project goes through (checkpoints, states, run
 * records, grid results, plots' data). */
#include "core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ba_read_file(const char *path, unsigned char **out, size_t *size, char *err)
{
    *out = NULL;
    *size = 0;
    /* Opened without blocking, so a FIFO is refused below instead of
     * waiting for a writer; the flag is cleared before reading. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ba_fail(err, BA_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ba_fail(err, BA_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    /* Directories, devices and pipes have no meaningful size to allocate
     * from. */
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ba_fail(err, BA_ERR_IO, "'%s' is not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return ba_fail(err, BA_ERR_IO, "cannot open '%s': %s", path, strerror(e));
    }
    if (sb.st_size < 0 || (uintmax_t)sb.st_size >= (uintmax_t)SIZE_MAX ||
        (long long)sb.st_size > BA_MAX_FILE_BYTES) {
        fclose(f);
        return ba_fail(err, BA_ERR_IO, "'%s' has %lld bytes, more than the %lld bytes (4 GiB) a "
                       "file read whole may have", path, (long long)sb.st_size,
                       BA_MAX_FILE_BYTES);
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %zu bytes to read '%s'", n, path);
    }
    size_t got = fread(buf, 1, n, f);
    int read_error = ferror(f);
    int e = errno;
    /* One more byte would mean the file grew after fstat: refuse rather
     * than parse a prefix of it. */
    int grew = got == n && fgetc(f) != EOF;
    fclose(f);
    if (got != n || read_error || grew) {
        free(buf);
        if (read_error)
            return ba_fail(err, BA_ERR_IO, "cannot read '%s': %s", path, strerror(e));
        return ba_fail(err, BA_ERR_IO, "'%s' changed size while being read (%zu of %zu bytes)",
                       path, got, n);
    }
    buf[n] = '\0'; /* text readers may treat the buffer as a string */
    *out = buf;
    *size = n;
    return BA_OK;
}

int ba_write_file_parts(const char *path, const ba_file_part *parts, int n, char *err)
{
    if (!path || n < 0 || (n > 0 && !parts))
        return ba_fail(err, BA_ERR_ARG, "ba_write_file_parts: bad arguments");
    /* The temporary name carries the process id: two processes may write
     * the same file (ablate processes sharing a grid), and each must rename
     * only what it wrote. */
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate a file name");
    snprintf(tmp, tlen, "%s.%ld.tmp", path, (long)getpid());
    /* The rename below would replace whatever is at path: a device node
     * (/dev/null, /dev/full), a FIFO, a socket or a directory is not ours to
     * replace. A symbolic link is followed for the check; the rename then
     * replaces the link itself, never its target. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        free(tmp);
        return ba_fail(err, BA_ERR_IO, "'%s' exists and is not a regular file; not replacing "
                       "it", path);
    }
    /* Never through a link planted under the temporary's name, and only
     * into a regular file: whatever else sits there (a FIFO, say) is
     * neither written nor renamed over path. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    struct stat tb;
    int regular = fd >= 0 && fstat(fd, &tb) == 0 && S_ISREG(tb.st_mode);
    FILE *f = regular ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int rc = ba_fail(err, BA_ERR_IO, "cannot create '%s': %s", tmp,
                         fd >= 0 && !regular ? "it exists and is not a regular file"
                                             : strerror(errno));
        if (fd >= 0)
            close(fd);
        if (regular)
            remove(tmp);
        free(tmp);
        return rc;
    }
    int ok = 1;
    for (int i = 0; ok && i < n; i++)
        ok = parts[i].len == 0 || fwrite(parts[i].data, 1, parts[i].len, f) == parts[i].len;
    /* on the disk before the rename makes it the file, so a crash of the
     * machine cannot leave a renamed but empty file */
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        int rc = ba_fail(err, BA_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                         strerror(errno));
        remove(tmp);
        free(tmp);
        return rc;
    }
    if (!ok) {
        remove(tmp);
        free(tmp);
        return ba_fail(err, BA_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    free(tmp);
    return BA_OK;
}

int ba_write_file(const char *path, const void *data, size_t len, char *err)
{
    if (!data && len)
        return ba_fail(err, BA_ERR_ARG, "ba_write_file: %zu bytes at NULL", len);
    ba_file_part p = {data, len};
    return ba_write_file_parts(path, &p, 1, err);
}
