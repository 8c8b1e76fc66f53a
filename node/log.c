/*
 * log.c - leveled log lines on stderr (log.h).
 *
 * Each line is formatted into a stack buffer and written with one write(2),
 * so concurrent writers never interleave inside a line; a line longer than
 * the buffer is cut and ends in "...". Logging never fails its caller.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "node/log.h"

#define LOG_LINE_MAX 1024

/* Atomic: every thread logs (the remotify thread too), and the level may be
 * set while they do. */
static _Atomic enum log_level log_level = LOG_INFO;

/* clang-format off */
static const char *const log_names[] = {
	[LOG_DEBUG] = "debug",
	[LOG_INFO] = "info",
	[LOG_NOTICE] = "notice",
	[LOG_WARN] = "warn",
	[LOG_ERROR] = "error",
};

/* syslog priorities, for the journal's "<N>" prefix */
static const int log_prio[] = {
	[LOG_DEBUG] = 7,
	[LOG_INFO] = 6,
	[LOG_NOTICE] = 5,
	[LOG_WARN] = 4,
	[LOG_ERROR] = 3,
};
/* clang-format on */

void log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level log_get_level(void)
{
	return log_level;
}

int log_level_parse(const char *s)
{
	int i;

	for (i = LOG_DEBUG; i <= LOG_ERROR; i++)
		if (!strcmp(s, log_names[i]))
			return i;
	if (!strcmp(s, "warning"))
		return LOG_WARN;
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	if ((int)level < LOG_DEBUG || level > LOG_ERROR)
		return "?";
	return log_names[level];
}

/* The journal timestamps lines itself: it wants "<N>" priority prefixes instead. */
static bool log_to_journal(void)
{
	static _Atomic int journal = -1; /* found out by the first caller, any thread */

	if (journal < 0)
		journal = getenv("JOURNAL_STREAM") != NULL;
	return journal;
}

void log_msg(enum log_level level, const char *file, int line, const char *fmt, ...)
{
	char buf[LOG_LINE_MAX];
	size_t n = 0, room = sizeof(buf) - 1; /* keep one byte for the newline */
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int r;

	if (level < log_level)
		return;
	if (log_to_journal()) {
		r = snprintf(buf, room, "<%d>", log_prio[level]);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		n = strftime(buf, room, "%Y-%m-%d %H:%M:%S", &tm);
		r = snprintf(buf + n, room - n, ".%03ld %s ", ts.tv_nsec / 1000000,
			     log_names[level]);
	}
	n += r > 0 ? (size_t)r : 0;
	if (level >= LOG_WARN && n < room) {
		r = snprintf(buf + n, room - n, "%s:%d: ", file, line);
		n += r > 0 ? (size_t)r : 0;
	}
	if (n < room) {
		va_start(ap, fmt);
		r = vsnprintf(buf + n, room - n, fmt, ap);
		va_end(ap);
		n += r > 0 ? (size_t)r : 0;
	}
	if (n >= room) {
		n = room - 1;
		memcpy(buf + n - 3, "...", 3);
	}
	buf[n++] = '\n';
	while (n) {
		ssize_t w = write(STDERR_FILENO, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		break; /* nowhere to report a failing log */
	}
}
