/* Shared by the fuzz targets: the readers under test take file paths, so
 * each input is written to a temporary file first. */
#ifndef BA_FUZZ_COMMON_H
#define BA_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes data to a new file named from "/tmp/ba_fuzz_XXXXXX" into path
 * (at least 20 bytes); the caller unlinks it. Aborts on failure: the
 * fuzzer's machine, not the input, is at fault then. */
static inline void write_temp(const uint8_t *data, size_t size, char *path)
{
    strcpy(path, "/tmp/ba_fuzz_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        abort();
    }
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            perror("write");
            abort();
        }
        done += (size_t)w;
    }
    close(fd);
}

#endif
