/* A file the configuration names, read at start (a certificate, a key, the
 * topology file, a secret): an operator may have named a FIFO, a device or
 * a directory by mistake (or an attacker who can write the folder, on
 * purpose). open(2) of a FIFO with no writer blocks for ever, and a read of
 * a device may never end: the doctor, a start or a reload's checks would
 * hang. So each such file is opened without blocking, looked at with
 * fstat, and anything but a regular file of a sane size is refused with a
 * line naming it. */
#ifndef M0_BASE_FILE_H
#define M0_BASE_FILE_H

#include <stddef.h>

/* path's bytes, malloc'd and NUL-terminated (*len without the NUL), when it
 * is a regular file of at most max bytes; else NULL with why: "cannot be
 * read: <errno>", "is not a regular file (a FIFO)" (a directory, a
 * character device...) or "holds more than <max> bytes". Opened with
 * O_NONBLOCK (an open of a FIFO returns at once), then looked at with
 * fstat before a byte is read. */
char *m0__file_read(const char *path, size_t max, size_t *len, char *why, size_t whylen);

#endif
