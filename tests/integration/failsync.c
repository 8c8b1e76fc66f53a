/*
 * failsync.c - an LD_PRELOAD shim for test_nbd.sh: fdatasync (and fsync)
 * fail with EIO, as the kernel reports a writeback error, while the file
 * named by $RAMSTER_FAILSYNC exists; otherwise the real call runs. Built by
 * the test script itself (cc -shared); device-mapper's error target would be
 * the real thing, but CI containers lack dm.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
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
