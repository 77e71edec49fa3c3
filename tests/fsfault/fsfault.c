/*
 * A failing file system under one folder, for fault tests: loaded with LD_PRELOAD into a
 * process, it makes the N-th file system change under FSFAULT_DIR fail with FSFAULT_ERRNO.
 *
 * A change is: an open for writing, write, pwrite, writev, fsync, fdatasync, ftruncate,
 * rename, unlink, mkdir. Reads never fail.
 *
 *   FSFAULT_DIR    the folder (an absolute, symlink-free path) whose changes are counted
 *   FSFAULT_AT     the 1-based change that fails; 0 or unset only counts
 *   FSFAULT_ERRNO  ENOSPC (default), EIO or EROFS
 *   FSFAULT_MODE   once: only that change fails (a transient error);
 *                  persist: it and every later change fail (a full or read-only disk);
 *                  short: as persist, but a failing write first writes half its bytes
 *   FSFAULT_COUNT  a file that receives the number of changes counted, at exit
 *   FSFAULT_LOG    set: each counted change is written to stderr as "fsfault N OP PATH"
 *
 * The test harness compiles this file with the system C compiler at test time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static char dir[PATH_MAX];
static size_t dirlen;
static long fail_at;
static int fail_errno = ENOSPC;
static int persist;
static int short_write;
static int log_changes;
static atomic_long counted;
static atomic_int tripped;

__attribute__((constructor)) static void fsfault_init(void) {
    const char *d = getenv("FSFAULT_DIR");
    if (d && *d && strlen(d) < sizeof dir) {
        strcpy(dir, d);
        dirlen = strlen(dir);
        while (dirlen > 1 && dir[dirlen - 1] == '/')
            dir[--dirlen] = 0;
    }
    const char *at = getenv("FSFAULT_AT");
    fail_at = at ? atol(at) : 0;
    const char *e = getenv("FSFAULT_ERRNO");
    if (e && strcmp(e, "EIO") == 0)
        fail_errno = EIO;
    else if (e && strcmp(e, "EROFS") == 0)
        fail_errno = EROFS;
    const char *m = getenv("FSFAULT_MODE");
    persist = m && (strcmp(m, "persist") == 0 || strcmp(m, "short") == 0);
    short_write = m && strcmp(m, "short") == 0;
    log_changes = getenv("FSFAULT_LOG") != NULL;
}

__attribute__((destructor)) static void fsfault_report(void) {
    const char *path = getenv("FSFAULT_COUNT");
    if (!path)
        return;
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%ld\n", atomic_load(&counted));
        fclose(f);
    }
}

static void *next(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "fsfault: no %s to wrap\n", name);
        abort();
    }
    return f;
}
#define REAL(ret, name, ...)                                                   \
    static ret (*real)(__VA_ARGS__);                                           \
    if (!real)                                                                 \
        real = (ret (*)(__VA_ARGS__))next(name);

/* The path the last check looked at, for FSFAULT_LOG. */
static __thread char seen[PATH_MAX];

static int under(const char *path) {
    if (!dirlen || !path)
        return 0;
    char abs[PATH_MAX];
    if (path[0] != '/') {
        if (!getcwd(abs, sizeof abs))
            return 0;
        size_t n = strlen(abs);
        if (n + 1 + strlen(path) >= sizeof abs)
            return 0;
        abs[n] = '/';
        strcpy(abs + n + 1, path);
        path = abs;
    }
    int inside = strncmp(path, dir, dirlen) == 0 && (path[dirlen] == '/' || path[dirlen] == 0);
    if (inside && log_changes)
        snprintf(seen, sizeof seen, "%s", path);
    return inside;
}

static int fd_under(int fd) {
    if (!dirlen || fd < 0)
        return 0;
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = 0;
    return under(target);
}

/* Count one change; 1 when it must fail. */
static int fails_op(const char *op, const char *path) {
    if (atomic_load(&tripped))
        return 1;
    long n = atomic_fetch_add(&counted, 1) + 1;
    if (log_changes) {
        char line[PATH_MAX + 64];
        int len = snprintf(line, sizeof line, "fsfault %ld %s %s%s\n", n, op, path ? path : "?",
                           fail_at == n ? " (fails)" : "");
        ssize_t (*raw)(int, const void *, size_t) = next("write");
        if (len > 0)
            raw(2, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
    }
    if (fail_at > 0 && n == fail_at) {
        if (persist)
            atomic_store(&tripped, 1);
        return 1;
    }
    return 0;
}

#define fails() fails_op(__func__, seen)

static int writes(int flags) { return flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND); }

#define FAIL_PATH(path, failed)                                                \
    if (under(path) && fails()) {                                              \
        errno = fail_errno;                                                    \
        return failed;                                                         \
    }
#define FAIL_FD(fd, failed)                                                    \
    if (fd_under(fd) && fails()) {                                             \
        errno = fail_errno;                                                    \
        return failed;                                                         \
    }

static int open_mode(int flags, va_list ap) {
    return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
    REAL(int, "open", const char *, int, ...);
    va_list ap;
    va_start(ap, flags);
    int mode = open_mode(flags, ap);
    va_end(ap);
    if (writes(flags))
        FAIL_PATH(path, -1);
    return real(path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    REAL(int, "open64", const char *, int, ...);
    va_list ap;
    va_start(ap, flags);
    int mode = open_mode(flags, ap);
    va_end(ap);
    if (writes(flags))
        FAIL_PATH(path, -1);
    return real(path, flags, mode);
}

static int at_under(int dirfd, const char *path) {
    if (path && path[0] == '/')
        return under(path);
    if (dirfd == AT_FDCWD)
        return under(path);
    return fd_under(dirfd);
}

int openat(int dirfd, const char *path, int flags, ...) {
    REAL(int, "openat", int, const char *, int, ...);
    va_list ap;
    va_start(ap, flags);
    int mode = open_mode(flags, ap);
    va_end(ap);
    if (writes(flags) && at_under(dirfd, path) && fails()) {
        errno = fail_errno;
        return -1;
    }
    return real(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    REAL(int, "openat64", int, const char *, int, ...);
    va_list ap;
    va_start(ap, flags);
    int mode = open_mode(flags, ap);
    va_end(ap);
    if (writes(flags) && at_under(dirfd, path) && fails()) {
        errno = fail_errno;
        return -1;
    }
    return real(dirfd, path, flags, mode);
}

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(ssize_t, "write", int, const void *, size_t);
    if (fd_under(fd) && fails()) {
        if (short_write && count > 1 && atomic_load(&tripped) == 1) {
            /* The first failing write stores half its bytes, as a disk filling up does. */
            atomic_store(&tripped, 2);
            return real(fd, buf, count / 2);
        }
        errno = fail_errno;
        return -1;
    }
    return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off) {
    REAL(ssize_t, "pwrite", int, const void *, size_t, off_t);
    FAIL_FD(fd, -1);
    return real(fd, buf, count, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off) {
    REAL(ssize_t, "pwrite64", int, const void *, size_t, off_t);
    FAIL_FD(fd, -1);
    return real(fd, buf, count, off);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    REAL(ssize_t, "writev", int, const struct iovec *, int);
    FAIL_FD(fd, -1);
    return real(fd, iov, n);
}

int fsync(int fd) {
    REAL(int, "fsync", int);
    FAIL_FD(fd, -1);
    return real(fd);
}

int fdatasync(int fd) {
    REAL(int, "fdatasync", int);
    FAIL_FD(fd, -1);
    return real(fd);
}

int ftruncate(int fd, off_t len) {
    REAL(int, "ftruncate", int, off_t);
    FAIL_FD(fd, -1);
    return real(fd, len);
}

int ftruncate64(int fd, off_t len) {
    REAL(int, "ftruncate64", int, off_t);
    FAIL_FD(fd, -1);
    return real(fd, len);
}

int rename(const char *from, const char *to) {
    REAL(int, "rename", const char *, const char *);
    if ((under(from) || under(to)) && fails()) {
        errno = fail_errno;
        return -1;
    }
    return real(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to) {
    REAL(int, "renameat", int, const char *, int, const char *);
    if ((at_under(fromfd, from) || at_under(tofd, to)) && fails()) {
        errno = fail_errno;
        return -1;
    }
    return real(fromfd, from, tofd, to);
}

int unlink(const char *path) {
    REAL(int, "unlink", const char *);
    FAIL_PATH(path, -1);
    return real(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
    REAL(int, "unlinkat", int, const char *, int);
    if (at_under(dirfd, path) && fails()) {
        errno = fail_errno;
        return -1;
    }
    return real(dirfd, path, flags);
}

int mkdir(const char *path, mode_t mode) {
    REAL(int, "mkdir", const char *, mode_t);
    FAIL_PATH(path, -1);
    return real(path, mode);
}
