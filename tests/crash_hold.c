/* The kill harness's hold points inside git's own file work (tests/crash_support.py, modes "create" and "remove"),
 * preloaded (LD_PRELOAD) into every process of a killed command, active only in git's (its program name starts
 * with "git") and only while $NERVE_CRASH_HOLD names a directory:
 *
 *   create  a file git just created (open with O_CREAT succeeded: it exists, still empty, nothing written yet)
 *   remove  a file or directory git is about to remove (unlink, unlinkat, rmdir: the ones before it are gone)
 *
 * The protocol is HOLD_SCRIPT's: each point's path is appended to <dir>/<kind>.count; when <dir>/<kind>.want
 * ("<n> <pattern>") exists, the n-th point whose path contains <pattern> (ends with it: "<pattern>$") writes
 * <dir>/reached and waits there until <dir>/release exists (the harness SIGKILLs the whole process group meanwhile). No /proc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char *program_invocation_short_name;

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_rmdir)(const char *);

static void resolve(void) {
    if (!real_open) {
        real_open = dlsym(RTLD_NEXT, "open");
        real_openat = dlsym(RTLD_NEXT, "openat");
        real_unlink = dlsym(RTLD_NEXT, "unlink");
        real_unlinkat = dlsym(RTLD_NEXT, "unlinkat");
        real_rmdir = dlsym(RTLD_NEXT, "rmdir");
    }
}

static void append(const char *file, const char *line) {
    int fd = real_open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    size_t n = strlen(line);
    if (write(fd, line, n) != (ssize_t)n) { /* best effort */ }
    close(fd);
}

static void point(const char *kind, int dirfd, const char *path) {
    const char *d = getenv("NERVE_CRASH_HOLD");
    if (!d || !*d || !path || strncmp(program_invocation_short_name, "git", 3) != 0) return;
    char full[8192], file[8192], line[8300];
    if (path[0] != '/') {
        char here[4096];
        if (dirfd == AT_FDCWD || dirfd < 0) {
            if (!getcwd(here, sizeof here)) return;
        } else {
            /* a directory descriptor's path would need /proc: only its name is known */
            snprintf(here, sizeof here, "<fd>");
        }
        snprintf(full, sizeof full, "%s/%s", here, path);
    } else {
        snprintf(full, sizeof full, "%s", path);
    }
    if (strncmp(full, d, strlen(d)) == 0) return;  /* the harness's own files */
    struct stat st;
    if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) return;
    int saved = errno;
    snprintf(file, sizeof file, "%s/%s.count", d, kind);
    snprintf(line, sizeof line, "%s\n", full);
    append(file, line);
    snprintf(file, sizeof file, "%s/%s.want", d, kind);
    FILE *w = fopen(file, "r");
    if (w) {
        long n = 0;
        char pattern[4096] = "";
        if (fscanf(w, "%ld", &n) == 1) {
            if (fgetc(w) == ' ' && fgets(pattern, sizeof pattern, w)) pattern[strcspn(pattern, "\n")] = 0;
        }
        fclose(w);
        size_t pl = strlen(pattern), fl = strlen(full);
        int match = pl && pattern[pl - 1] == '$'  /* "...$": the path ends with it */
            ? (fl >= pl - 1 && strncmp(full + fl - (pl - 1), pattern, pl - 1) == 0)
            : strstr(full, pattern) != NULL;
        if (n > 0 && match) {
            snprintf(file, sizeof file, "%s/%s.matched", d, kind);
            append(file, "x\n");
            if (stat(file, &st) == 0 && st.st_size / 2 == n) {
                char tmp[8192], reached[8192];
                snprintf(tmp, sizeof tmp, "%s/reached.tmp", d);
                snprintf(reached, sizeof reached, "%s/reached", d);
                snprintf(line, sizeof line, "%s %s\n", kind, full);
                append(tmp, line);
                rename(tmp, reached);
                snprintf(file, sizeof file, "%s/release", d);
                while (access(file, F_OK) != 0) usleep(20000);
            }
        }
    }
    errno = saved;
}

/* The mode an open/openat caller passed: its third argument is there only when the flags create a file.
   A macro, since va_start must run in the variadic function itself. */
#define OPTIONAL_MODE(mode, flags)                 \
    mode_t mode = 0;                               \
    if ((flags) & (O_CREAT | O_TMPFILE)) {         \
        va_list ap;                                \
        va_start(ap, flags);                       \
        mode = va_arg(ap, mode_t);                 \
        va_end(ap);                                \
    }

int open(const char *path, int flags, ...) {
    resolve();
    OPTIONAL_MODE(mode, flags);
    int fd = real_open(path, flags, mode);
    if (fd >= 0 && (flags & O_CREAT)) point("create", AT_FDCWD, path);
    return fd;
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...) {
    resolve();
    OPTIONAL_MODE(mode, flags);
    int fd = real_openat(dirfd, path, flags, mode);
    if (fd >= 0 && (flags & O_CREAT)) point("create", dirfd, path);
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

int unlink(const char *path) {
    resolve();
    point("remove", AT_FDCWD, path);
    return real_unlink(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
    resolve();
    point("remove", dirfd, path);
    return real_unlinkat(dirfd, path, flags);
}

int rmdir(const char *path) {
    resolve();
    point("remove", AT_FDCWD, path);
    return real_rmdir(path);
}
