/*
 * failsync.c - an LD_PRELOAD shim for test_nbd.sh: fdatasync (and fsync)
 * fail with EIO, as the kernel reports a writeback error, while the file
 * named by $RAMSTER_FAILSYNC exists; otherwise the real call runs. Built by
 * the test script itself (cc -shared); device-mapper's error target would be
 * the real thing, but CI containers lack dm. While the file named by
 * $RAMSTER_SLOWIO exists, pread and pwrite of a regular file take 2 ms more
 * each (a slow disk): whatever runs them on the event loop stalls it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int failing(void)
{
	const char *f = getenv("RAMSTER_FAILSYNC");

	return f && access(f, F_OK) == 0;
}

int fdatasync(int fd)
{
	static int (*real)(int);

	if (failing()) {
		errno = EIO;
		return -1;
	}
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	return real(fd);
}

int fsync(int fd)
{
	static int (*real)(int);

	if (failing()) {
		errno = EIO;
		return -1;
	}
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	return real(fd);
}

/* A regular file's I/O while $RAMSTER_SLOWIO exists: 2 ms late. */
static void slow(int fd)
{
	const char *f = getenv("RAMSTER_SLOWIO");
	struct stat st;

	if (f && access(f, F_OK) == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		usleep(2000);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	static ssize_t (*real)(int, const void *, size_t, off_t);

	slow(fd);
	if (!real)
		real = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
	return real(fd, buf, n, off);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	static ssize_t (*real)(int, void *, size_t, off_t);

	slow(fd);
	if (!real)
		real = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
	return real(fd, buf, n, off);
}
